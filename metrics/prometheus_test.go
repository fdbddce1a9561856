package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotlane/hotlane/verify"
	"github.com/hotlane/hotlane/vm"
)

// A real Prometheus (trixie's, fetched through the private apt state like
// the VM kernel) scrapes `hotlane verify --listen` while a known thread
// sleeps in a loop; histogram_quantile(0.99) over the scraped buckets lands
// in the bucket hotlane's own report gives for p99, and the loss counters
// are there.
func TestPrometheusScrapesVerify(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches the tracer: needs root")
	}
	if testing.Short() {
		t.Skip("fetches and runs Prometheus; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cache, err := vm.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	prom, err := vm.FetchProgram(ctx, cache, "trixie", "prometheus", "/usr/bin/prometheus", testLog{t})
	if err != nil {
		t.Fatalf("fetch Prometheus: %v", err)
	}
	dir := t.TempDir()
	hotlane := filepath.Join(dir, "hotlane")
	build := exec.Command("go", "build", "-o", hotlane, "../cmd/hotlane")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// The measured thread: sleep, under a name nothing else on the
	// machine has, woken 100 times a second.
	sleeper := filepath.Join(dir, "hlpromsleep")
	if err := copyFile("/bin/sleep", sleeper); err != nil {
		t.Fatal(err)
	}
	loop := exec.Command("sh", "-c", `while :; do "$0" 0.01; done`, sleeper)
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	defer loop.Process.Kill()

	hotlanePort, promPort := freePort(t), freePort(t)
	report := filepath.Join(dir, "report.json")
	verifyCmd := exec.Command(hotlane, "verify", "--listen", "127.0.0.1:"+hotlanePort, "--inference-comm", "hlpromsleep",
		"--comm", "hlpromsleep", "--json", report, "--top", "0", "-q")
	var verifyOut strings.Builder
	verifyCmd.Stdout, verifyCmd.Stderr = &verifyOut, &verifyOut
	if err := verifyCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer verifyCmd.Process.Kill()

	config := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(config, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: hotlane
    static_configs:
      - targets: ["127.0.0.1:%s"]
`, hotlanePort)), 0o644)
	promCmd := exec.CommandContext(ctx, prom, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address=127.0.0.1:"+promPort)
	var promOut strings.Builder
	promCmd.Stdout, promCmd.Stderr = &promOut, &promOut
	if err := promCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		promCmd.Process.Kill()
		promCmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s\nhotlane verify:\n%s", tail(promOut.String(), 20), verifyOut.String())
		}
	}()
	api := "http://127.0.0.1:" + promPort

	// Prometheus up and scraping hotlane, with samples of the class.
	samples := `sum(hotlane_runqueue_latency_seconds_count{class="inference",view="wait"})`
	waitFor(t, ctx, "Prometheus to scrape samples of the inference class", func() bool {
		v, err := query(api, samples)
		return err == nil && v > 50
	})
	time.Sleep(3 * time.Second)
	// The figures stop moving once the sleeper stops; two scrapes later
	// Prometheus has the final ones.
	loop.Process.Kill()
	loop.Wait()
	time.Sleep(3500 * time.Millisecond)
	p99, err := query(api, `histogram_quantile(0.99, sum by (le) (hotlane_runqueue_latency_seconds_bucket{class="inference",view="wait"}))`)
	if err != nil {
		t.Fatal(err)
	}
	scraped, _ := query(api, samples)
	lost, err := query(api, `count(hotlane_tracer_lost_total)`)
	if err != nil || lost < 5 {
		t.Errorf("loss counters: %v series (%v), want one per reason", lost, err)
	}

	verifyCmd.Process.Signal(syscall.SIGTERM)
	if err := verifyCmd.Wait(); err != nil {
		t.Fatalf("hotlane verify: %v\n%s", err, verifyOut.String())
	}
	var res verify.Result
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	var h *verify.Histogram
	for _, c := range res.Snapshot.Classes {
		if c.Class == "inference" {
			h = c.Hist
		}
	}
	if h == nil || h.Count() == 0 {
		t.Fatalf("hotlane's report has no inference samples:\n%s", data)
	}
	lo, hi := h.Quantile(0.99)
	t.Logf("Prometheus: %v samples, p99 %.1fµs; hotlane: %d samples, p99 in [%.1fµs, %.1fµs)",
		scraped, p99*1e6, h.Count(), float64(lo)/1e3, float64(hi)/1e3)
	if uint64(scraped) != h.Count() {
		t.Errorf("Prometheus's last scrape had %v samples, hotlane's report %d: the figures moved after the sleeper stopped", scraped, h.Count())
	}
	if p99 < float64(lo)/1e9 || p99 > float64(hi)/1e9 {
		t.Errorf("histogram_quantile(0.99) = %gs, outside hotlane's p99 bucket [%gs, %gs)", p99, float64(lo)/1e9, float64(hi)/1e9)
	}
}

// query runs an instant PromQL query that returns one number.
func query(api, q string) (float64, error) {
	resp, err := http.Get(api + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, err
	}
	if out.Status != "success" {
		return 0, fmt.Errorf("query %s: %s", q, out.Error)
	}
	if len(out.Data.Result) != 1 {
		return 0, fmt.Errorf("query %s: %d results, want 1", q, len(out.Data.Result))
	}
	s, _ := out.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o755)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
