package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/hotlane/hotlane/metrics"
	"github.com/hotlane/hotlane/probe/xdp"
	"github.com/hotlane/hotlane/report"
)

func runProbeXDP(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("probe xdp", flag.ContinueOnError)
	var (
		iface     = fs.String("iface", "", "the interface to attach to (required)")
		drop      = fs.String("drop", "", "drop these protocols, comma-separated: tcp, udp, icmp, icmpv6, frag, other, ipv4, ipv6,\nnon-ip, malformed, or a class such as ipv6/udp")
		ports     = fs.String("allow-udp-ports", "", "allow UDP only to these destination ports (e.g. 53,123,5000-5010); other UDP is dropped")
		ethTypes  = fs.String("drop-ethertype", "", "drop frames of these EtherTypes (e.g. 0x88cc, lldp, arp), checked at every VLAN layer")
		polFile   = fs.String("policy", "", "read the drop policy from this JSON `file` instead of --drop/--allow-udp-ports/--drop-ethertype")
		mode      = fs.String("mode", "auto", "XDP attach mode: auto (driver, else generic), driver or generic")
		replace   = fs.Bool("replace", false, "detach an XDP program already on the interface (it is not restored)")
		duration  = durationFlag(fs, "duration", 0, 0, 0, "how long to measure; 0: until Ctrl-C or SIGTERM")
		interval  = durationFlag(fs, "interval", xdp.DefaultInterval, 100*time.Millisecond, 0, "time between progress lines")
		quiet     = fs.Bool("q", false, "no progress lines; with --json -, no text report either: the JSON alone (machine-only)")
		listen    = fs.String("listen", "", "serve Prometheus metrics on ADDR/metrics while counting (e.g. 127.0.0.1:9464): frames, bytes and drops per class, malformed frames per reason, labelled by interface")
		webConfig = webConfigFlag(fs)
		jsonPath  = fs.String("json", "", "also write the report as JSON to this file (-: standard output, and the text report goes to standard error)")
	)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: hotlane probe xdp --iface IF [--drop LIST] [--allow-udp-ports LIST]
                         [--drop-ethertype LIST | --policy FILE] [--duration D] [--json FILE]

Attaches an XDP program to an interface and counts every received frame
and its bytes per protocol class (IPv4/IPv6 x TCP/UDP/ICMP/ICMPv6/fragment/
other, non-IP by EtherType, malformed by reason), per CPU, while applying a
drop policy. Driver mode is used when the driver supports it, generic mode
otherwise; the report says which. The program is detached on exit, and if
another XDP program is already attached hotlane refuses unless --replace.

Malformed frames (cut short, bad lengths, nested deeper than 2 VLAN tags or
8 IPv6 extension headers) are counted by reason and passed to the kernel,
which checks them again; --drop malformed drops them instead.

Policy file (every field optional):
  {"drop": ["icmp"], "allow_udp_ports": [53, "5000-5010"], "drop_ethertypes": ["lldp"]}

Examples:
  hotlane probe xdp --iface eth0 --duration 10s
  hotlane probe xdp --iface eth0 --drop icmp,icmpv6 --allow-udp-ports 53,123
  hotlane probe xdp --iface eth0 --policy drop.json --json - | jq .classes

%s

Flags:
`, probeExitHelp)
		printFlags(fs)
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "hotlane probe xdp: %v\n", err)
		return exitError
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if *iface == "" {
		return fail(fmt.Errorf("--iface is required; see `ip link` for the interfaces"))
	}
	pol, err := xdp.PolicyFromFlags(*drop, *ports, *ethTypes, *polFile)
	if err != nil {
		return fail(err)
	}
	m, err := xdp.ParseMode(*mode)
	if err != nil {
		return fail(err)
	}

	// Checked before attaching, so that a bad path fails first.
	jsonOut, err := newOutput(*jsonPath, anyoneReads)
	if err != nil {
		return fail(err)
	}
	opts := xdp.Options{Duration: *duration, Progress: os.Stderr, Interval: *interval}
	if *quiet {
		opts.Progress = nil
	}
	opts.Attached = func(a *xdp.Attachment) {
		how := a.Mode.String() + " mode"
		if a.DriverModeError != nil {
			how += " (driver mode unavailable: " + a.DriverModeError.Error() + ")"
		}
		until := "Ctrl-C"
		if *duration > 0 {
			until = (*duration).Round(time.Millisecond).String() + " or Ctrl-C"
		}
		fmt.Fprintf(os.Stderr, "hotlane: XDP attached to %s in %s; policy: %s; counting until %s\n", a.Interface, how, pol, until)
	}
	var col *metrics.XDPCollector
	if *listen != "" {
		col = metrics.NewXDPCollector()
		srv, err := serveMetrics("hotlane probe xdp", *listen, *webConfig, *quiet, col)
		if err != nil {
			return fail(err)
		}
		defer srv.Close()
		opts.Live = col.Live
	}
	rep, err := xdp.Run(ctx, xdp.Config{Interface: *iface, Policy: pol, Mode: m, Replace: *replace}, opts)
	if err != nil {
		return fail(err)
	}
	if col != nil {
		col.Final(rep)
	}
	if err := rep.WriteText(textOut(jsonOut, *quiet)); err != nil {
		return fail(err)
	}
	if err := jsonOut.write(rep.WriteJSON); err != nil {
		return fail(err)
	}
	return exitCode(report.Judge(rep.Interrupted, true))
}
