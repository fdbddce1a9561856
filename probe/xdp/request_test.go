package xdp

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/internal/errtest"
)

func TestRequestValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		req  Request
		want string // in the error; "" for none
	}{
		{"an interface", Request{Interface: "eth0"}, ""},
		{"no interface", Request{}, "--iface is required; see `ip link` for the interfaces"},
		{"an argument left over", Request{Interface: "eth0", Args: []string{"eth1"}}, `unexpected argument "eth1"`},
	} {
		if err := tt.req.Validate(); !errtest.Says(err, tt.want) {
			t.Errorf("%s: Validate() = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestRequestConfig(t *testing.T) {
	cfg, err := Request{Interface: "eth0", Drop: "icmp", AllowUDPPorts: "53", Mode: "generic", Replace: true}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Interface != "eth0" || cfg.Mode != ModeGeneric || !cfg.Replace || cfg.Policy.Drop == 0 || len(cfg.Policy.AllowUDPPorts) != 1 {
		t.Errorf("Config() = %+v, want eth0 in generic mode, replacing, dropping icmp, allowing UDP to 53", cfg)
	}
	for _, tt := range []struct {
		name string
		req  Request
		want string
	}{
		{"a policy file beside rules", Request{Drop: "icmp", PolicyFile: "drop.json"}, "--policy and --drop/--allow-udp-ports/--drop-ethertype exclude each other"},
		{"an unknown mode", Request{Mode: "fast"}, `unknown XDP mode "fast"; valid: auto, driver, generic`},
	} {
		if _, err := tt.req.Config(); !errtest.Says(err, tt.want) {
			t.Errorf("%s: Config() = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestRequestOptions(t *testing.T) {
	var progress, log strings.Builder
	cfg := Config{Interface: "eth0"}
	att := &Attachment{Interface: "eth0", Mode: ModeGeneric, DriverModeError: errors.New("operation not supported")}
	for _, tt := range []struct {
		duration time.Duration
		until    string
	}{
		{0, "counting until Ctrl-C"},
		{1500 * time.Microsecond, "counting until 2ms or Ctrl-C"},
	} {
		log.Reset()
		opts := Request{Duration: tt.duration, Interval: time.Second, Progress: &progress, Log: &log}.Options(cfg)
		if opts.Duration != tt.duration || opts.Interval != time.Second || opts.Progress != &progress {
			t.Errorf("Options() = %+v, want the duration, interval and progress asked for", opts)
		}
		opts.Attached(att)
		want := "hotlane: XDP attached to eth0 in generic mode (driver mode unavailable: operation not supported); policy: count only, drop nothing; " + tt.until + "\n"
		if log.String() != want {
			t.Errorf("attached line %q, want %q", log.String(), want)
		}
	}
	if opts := (Request{}).Options(cfg); opts.Attached != nil || opts.Progress != nil {
		t.Error("without a log: the attachment or progress still said")
	}
}
