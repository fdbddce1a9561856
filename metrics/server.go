package metrics

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/hotlane/hotlane/internal/infile"
)

// ServerConfig is how the endpoint treats its clients. A scrape is one
// short request; a client that connects and then sends nothing, never
// reads its answer or keeps a connection idle is dropped after these
// times, and no more than MaxConns are served at once, so that a busy or
// hostile network cannot pile up goroutines and file descriptors in a
// privileged process.
type ServerConfig struct {
	// ReadHeaderTimeout and ReadTimeout bound reading a request's
	// headers and the whole request; WriteTimeout writing its answer
	// (from the end of the request's headers); IdleTimeout how long a
	// kept-alive connection may wait for its next request.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxConns caps the connections open at once; more wait, unaccepted,
	// in the kernel's listen queue until one closes.
	MaxConns int
	// WebConfigFile, if set, is a Prometheus exporter-toolkit web
	// configuration (TLS, basic auth), as node_exporter's
	// --web.config.file reads: https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md
	WebConfigFile string
}

// DefaultServerConfig suits Prometheus scraping every 10 s to 1 min: its
// scrape timeout is 10 s by default. A connection idle for 15 s is closed
// even if the next scrape would have reused it: a new connection per
// scrape costs little, idle ones held open by anyone cost a slot each.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       15 * time.Second,
		MaxConns:          32,
	}
}

// MaxWebConfigSize caps the web configuration file: a few lines of YAML.
const MaxWebConfigSize = 64 << 10

// ErrBadWebConfig is wrapped when the web configuration is refused.
var ErrBadWebConfig = errors.New("bad web configuration")

// check refuses a configuration that cannot work, at start rather than at
// the first scrape.
func (c ServerConfig) check() error {
	if c.MaxConns < 1 {
		return fmt.Errorf("metrics server: MaxConns %d, want at least 1", c.MaxConns)
	}
	if c.WebConfigFile == "" {
		return nil
	}
	if err := infile.Check("web configuration", c.WebConfigFile, MaxWebConfigSize); err != nil {
		return fmt.Errorf("%w: %w", ErrBadWebConfig, err)
	}
	if err := web.Validate(c.WebConfigFile); err != nil {
		return fmt.Errorf("%w %s: %w", ErrBadWebConfig, c.WebConfigFile, err)
	}
	return nil
}

// serve serves h on ln as c says, until srv is shut down.
func (c ServerConfig) serve(srv *http.Server, ln net.Listener) error {
	path := c.WebConfigFile
	// The toolkit logs where it listens and whether TLS is on; hotlane
	// says where it serves itself.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	return web.Serve(ln, srv, &web.FlagConfig{WebConfigFile: &path}, quiet)
}

// limitListener accepts at most n connections at a time: Accept waits
// for one of them to close. (golang.org/x/net/netutil.LimitListener,
// without the module for fifteen lines.)
type limitListener struct {
	net.Listener
	slots     chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	// Waiting for a slot must not outlive the listener: the server's
	// Serve returns only once Accept does.
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitConn gives its slot back once, however often it is closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// BindsEverywhere reports whether a listen address leaves its host empty
// or unspecified (":9464", "0.0.0.0:9464", "[::]:9464"): it listens on
// every interface of the machine, every network it is on included.
func BindsEverywhere(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
