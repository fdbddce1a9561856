package xdp

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The privileged tests build their own little network: two namespaces, A
// and B, joined by a veth pair, with TEST-NET-1 addresses (RFC 5737) and
// IPv6 off so that nothing but the test's own traffic crosses the pair.
// The probe attaches to B's end. Everything is deleted when the test ends.
//
//	netns A: hlva 192.0.2.1/24  <-- veth -->  hlvb 192.0.2.2/24 :netns B
const (
	addrA = "192.0.2.1"
	addrB = "192.0.2.2"
	ifA   = "hlva"
	ifB   = "hlvb"
)

type topology struct {
	nsA, nsB string
}

func ip(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func requireIP(t testing.TB) {
	t.Helper()
	requireRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip to build network namespaces")
	}
}

// newTopology creates the namespaces and the veth pair.
func newTopology(t testing.TB) *topology {
	t.Helper()
	requireIP(t)
	sweepNamespaces()
	// The pid in the name lets a later run delete what a killed run left.
	id := fmt.Sprintf("hltest-%d-%d", os.Getpid(), rand.IntN(1<<20))
	tp := &topology{nsA: id + "-a", nsB: id + "-b"}
	for _, ns := range []string{tp.nsA, tp.nsB} {
		ip(t, "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "delete", ns).Run() })
		ip(t, "-n", ns, "link", "set", "lo", "up")
		// IPv6 off before the veth exists, so its ends never send router
		// solicitations, MLD reports or DAD probes.
		if err := inNetns(ns, func() error {
			for _, f := range []string{"all", "default"} {
				if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+f+"/disable_ipv6", []byte("1"), 0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatalf("disable IPv6 in %s: %v", ns, err)
		}
	}
	ip(t, "-n", tp.nsA, "link", "add", ifA, "type", "veth", "peer", "name", ifB, "netns", tp.nsB)
	ip(t, "-n", tp.nsA, "addr", "add", addrA+"/24", "dev", ifA)
	ip(t, "-n", tp.nsB, "addr", "add", addrB+"/24", "dev", ifB)
	ip(t, "-n", tp.nsA, "link", "set", ifA, "up")
	ip(t, "-n", tp.nsB, "link", "set", ifB, "up")
	return tp
}

// sweepNamespaces deletes namespaces left by test processes that died
// before their cleanups ran (a test timeout, kill -9): hltest-PID-… whose
// PID no longer exists.
func sweepNamespaces() {
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		var pid, n int
		var rest string
		if k, _ := fmt.Sscanf(e.Name(), "hltest-%d-%d-%s", &pid, &n, &rest); k != 3 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); err == unix.ESRCH {
			exec.Command("ip", "netns", "delete", e.Name()).Run()
		}
	}
}

// inNetns runs fn on an OS thread that has joined the named network
// namespace. Sockets, netlink queries and XDP attachments made by fn belong
// to that namespace, and sockets stay there when used from elsewhere. The
// thread goes back to its namespace afterwards, or dies if it cannot.
func inNetns(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + name)
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", name, err)
			return
		}
		err = fn()
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked and exits with this goroutine
		errc <- err
	}()
	return <-errc
}

// ifindexIn returns the index of an interface inside a namespace.
func ifindexIn(t testing.TB, ns, name string) int {
	t.Helper()
	var idx int
	if err := inNetns(ns, func() (err error) { idx, err = LookupInterface(name); return err }); err != nil {
		t.Fatal(err)
	}
	return idx
}

// attachedIn returns what QueryXDP reports for an interface in a namespace.
func attachedIn(t testing.TB, ns, name string) []Attached {
	t.Helper()
	idx := ifindexIn(t, ns, name)
	var got []Attached
	if err := inNetns(ns, func() (err error) { got, err = QueryXDP(idx); return err }); err != nil {
		t.Fatal(err)
	}
	return got
}

// ping sends n ICMP echo requests with payload from a raw socket in ns and
// counts the distinct replies that arrive within wait.
func ping(ns, dst string, n int, payload []byte, wait time.Duration) (int, error) {
	var replies int
	err := inNetns(ns, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		if err != nil {
			return fmt.Errorf("raw ICMP socket: %w", err)
		}
		defer unix.Close(fd)
		to := &unix.SockaddrInet4{}
		copy(to.Addr[:], net.ParseIP(dst).To4())
		id := uint16(rand.IntN(1 << 16))
		for seq := range n {
			msg := cat([]byte{8, 0, 0, 0}, be16(id), be16(uint16(seq)), payload)
			binary.BigEndian.PutUint16(msg[2:4], inetChecksum(msg))
			if err := unix.Sendto(fd, msg, 0, to); err != nil {
				return fmt.Errorf("send echo request: %w", err)
			}
		}
		seen := map[uint16]bool{}
		deadline := time.Now().Add(wait)
		buf := make([]byte, 1500)
		for len(seen) < n {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			tv := unix.NsecToTimeval(left.Nanoseconds())
			if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
				return err
			}
			m, _, err := unix.Recvfrom(fd, buf, 0)
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if err != nil {
				return fmt.Errorf("receive: %w", err)
			}
			// A raw socket gets the IP header too.
			if m < 20 || m < int(buf[0]&0xf)*4+8 {
				continue
			}
			icmp := buf[int(buf[0]&0xf)*4 : m]
			if icmp[0] == 0 && binary.BigEndian.Uint16(icmp[4:6]) == id { // echo reply, ours
				seen[binary.BigEndian.Uint16(icmp[6:8])] = true
			}
		}
		replies = len(seen)
		return nil
	})
	return replies, err
}

func inetChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// udpServer listens in ns and counts datagrams until stopped.
type udpServer struct {
	conn *net.UDPConn
	got  chan int
}

func listenUDP(t testing.TB, ns, addr string) *udpServer {
	t.Helper()
	var conn *net.UDPConn
	if err := inNetns(ns, func() (err error) {
		conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(mustAddrPort(addr)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s := &udpServer{conn: conn, got: make(chan int, 1)}
	go func() {
		n := 0
		buf := make([]byte, 2048)
		for {
			if _, _, err := conn.ReadFromUDP(buf); err != nil {
				s.got <- n
				return
			}
			n++
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return s
}

// count waits for quiet, closes the server and returns what it received.
func (s *udpServer) count(quiet time.Duration) int {
	s.conn.SetReadDeadline(time.Now().Add(quiet))
	n := <-s.got
	s.conn.Close()
	return n
}

// sendUDP sends n datagrams of payload from ns to addr.
func sendUDP(ns, addr string, n int, payload []byte) error {
	return inNetns(ns, func() error {
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(mustAddrPort(addr)))
		if err != nil {
			return err
		}
		defer c.Close()
		for range n {
			if _, err := c.Write(payload); err != nil {
				return err
			}
		}
		return nil
	})
}

// tcpServer accepts connections in ns and collects what each one sent.
type tcpServer struct {
	ln   net.Listener
	msgs chan string
}

func listenTCP(t testing.TB, ns, addr string) *tcpServer {
	t.Helper()
	var ln net.Listener
	if err := inNetns(ns, func() (err error) { ln, err = net.Listen("tcp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	s := &tcpServer{ln: ln, msgs: make(chan string, 100)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				var b strings.Builder
				buf := make([]byte, 512)
				for {
					n, err := c.Read(buf)
					b.Write(buf[:n])
					if err != nil {
						break
					}
				}
				s.msgs <- b.String()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

// connectTCP opens n connections from ns to addr, each sending msg and
// closing.
func connectTCP(ns, addr string, n int, msg string) error {
	for range n {
		err := inNetns(ns, func() error {
			c, err := net.DialTimeout("tcp4", addr, 3*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte(msg))
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
