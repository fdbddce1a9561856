package metrics

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sys/unix"
)

// shortTimeouts make the server drop stalled clients within a test; the
// test waits far longer (patience) before calling a client kept.
func shortTimeouts(maxConns int) ServerConfig {
	return ServerConfig{
		ReadHeaderTimeout: 200 * time.Millisecond,
		ReadTimeout:       200 * time.Millisecond,
		WriteTimeout:      200 * time.Millisecond,
		IdleTimeout:       200 * time.Millisecond,
		MaxConns:          maxConns,
	}
}

const patience = 20 * time.Second

// closedByServer waits until the server closes c, reading and dropping
// whatever it still sends, and fails if it is still open after patience.
func closedByServer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(patience))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: the server kept the connection open for %s", what, patience)
	}
}

// A client that connects and says nothing, and one that keeps its
// connection alive after a scrape, are dropped by the server's timeouts.
func TestServerDropsIdleClients(t *testing.T) {
	s, err := Serve("127.0.0.1:0", shortTimeouts(4))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	silent, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	closedByServer(t, silent, "a client that sends nothing")

	kept, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	fmt.Fprintf(kept, "GET /metrics HTTP/1.1\r\nHost: hotlane\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(kept), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("scrape: %s, close %v: want 200 on a connection kept alive", resp.Status, resp.Close)
	}
	closedByServer(t, kept, "an idle kept-alive connection")
}

// bigCollector exports about n bytes of series, more than the kernel's
// socket buffers hold, so that a client that does not read stalls the
// server's write.
type bigCollector struct {
	desc *prometheus.Desc
	n    int
}

func (b bigCollector) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

func (b bigCollector) Collect(ch chan<- prometheus.Metric) {
	label := strings.Repeat("x", 100)
	for i := range b.n / 150 {
		ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, 1, fmt.Sprintf("%s%d", label, i))
	}
}

// A client that asks and never reads is dropped by the write timeout and
// gives its connection slot back: with one slot, the next scrape is
// served.
func TestServerDropsClientsThatDoNotRead(t *testing.T) {
	big := bigCollector{prometheus.NewDesc("hotlane_test_padding", "Padding.", []string{"l"}, nil), 32 << 20}
	s, err := Serve("127.0.0.1:0", shortTimeouts(1), big)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A small receive buffer, set before connecting, so the window stays
	// small.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
		return serr
	}}
	stalled, err := d.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	fmt.Fprintf(stalled, "GET /metrics HTTP/1.1\r\nHost: hotlane\r\n\r\n")

	client := http.Client{Timeout: patience}
	resp, err := client.Get("http://" + s.Addr + "/")
	if err != nil {
		t.Fatalf("a scrape behind a client that does not read: %v", err)
	}
	resp.Body.Close()
	closedByServer(t, stalled, "a client that does not read")
}

// No more than MaxConns connections are served at once: with both slots
// held by silent clients a scrape is not answered, and once one of them
// leaves, it is.
func TestServerCapsConnections(t *testing.T) {
	cfg := DefaultServerConfig()
	cfg.MaxConns = 2
	s, err := Serve("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// Cannot pass by waiting too little: with the cap working, this is
	// never answered.
	short := http.Client{Timeout: 500 * time.Millisecond}
	if resp, err := short.Get("http://" + s.Addr + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("a third connection was served beside two held ones (MaxConns 2)")
	}
	held[0].Close()
	client := http.Client{Timeout: patience}
	resp, err := client.Get("http://" + s.Addr + "/")
	if err != nil {
		t.Fatalf("after a slot was freed: %v", err)
	}
	resp.Body.Close()
}

func TestBindsEverywhere(t *testing.T) {
	for addr, want := range map[string]bool{
		":9464": true, "0.0.0.0:9464": true, "[::]:9464": true,
		"127.0.0.1:9464": false, "[::1]:0": false, "10.1.2.3:9464": false, "localhost:9464": false, "nonsense": false,
	} {
		if got := BindsEverywhere(addr); got != want {
			t.Errorf("BindsEverywhere(%q) = %v, want %v", addr, got, want)
		}
	}
}

// A web configuration with basic auth users makes /metrics ask for a
// password (the exporter-toolkit's format); one that is not a regular
// file, or not valid, is refused before anything is served.
func TestServerWebConfig(t *testing.T) {
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("basic_auth_users:\n  prometheus: %s\n", hash)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultServerConfig()
	cfg.WebConfigFile = conf
	s, err := Serve("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		user, password string
		want           int
	}{{"", "", http.StatusUnauthorized}, {"prometheus", "wrong", http.StatusUnauthorized}, {"prometheus", "s3cret", http.StatusOK}} {
		req, _ := http.NewRequest("GET", "http://"+s.Addr+"/metrics", nil)
		if c.user != "" {
			req.SetBasicAuth(c.user, c.password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("user %q password %q: %s, want %d", c.user, c.password, resp.Status, c.want)
		}
	}

	bad := filepath.Join(dir, "bad.yml")
	os.WriteFile(bad, []byte("tls_server_config: [\n"), 0o600)
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, fifo, filepath.Join(dir, "missing.yml")} {
		cfg.WebConfigFile = path
		if s, err := Serve("127.0.0.1:0", cfg); !errors.Is(err, ErrBadWebConfig) {
			if err == nil {
				s.Close()
			}
			t.Errorf("web config %s: %v, want ErrBadWebConfig", filepath.Base(path), err)
		}
	}
}
