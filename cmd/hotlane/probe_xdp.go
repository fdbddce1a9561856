package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/hotlane/hotlane/metrics"
	"github.com/hotlane/hotlane/probe/xdp"
)

const probeXDPUsage = `Usage: hotlane probe xdp --iface IF [--drop LIST] [--allow-udp-ports LIST]
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

` + probeExitHelp + `

Flags:
`

// probeXDPFlags are the flags of hotlane probe xdp.
type probeXDPFlags struct {
	iface, drop, ports, ethTypes, polFile, mode, listen, webConfig, jsonPath *string
	replace, quiet                                                           *bool
	duration, interval                                                       *time.Duration
}

func newProbeXDPFlags(fs *flag.FlagSet) *probeXDPFlags {
	f := &probeXDPFlags{
		iface:     fs.String("iface", "", "the interface to attach to (required)"),
		drop:      fs.String("drop", "", "drop these protocols, comma-separated: tcp, udp, icmp, icmpv6, frag, other, ipv4, ipv6,\nnon-ip, malformed, or a class such as ipv6/udp"),
		ports:     fs.String("allow-udp-ports", "", "allow UDP only to these destination ports (e.g. 53,123,5000-5010); other UDP is dropped"),
		ethTypes:  fs.String("drop-ethertype", "", "drop frames of these EtherTypes (e.g. 0x88cc, lldp, arp), checked at every VLAN layer"),
		polFile:   fs.String("policy", "", "read the drop policy from this JSON `file` instead of --drop/--allow-udp-ports/--drop-ethertype"),
		mode:      fs.String("mode", "auto", "XDP attach mode: auto (driver, else generic), driver or generic"),
		replace:   fs.Bool("replace", false, "detach an XDP program already on the interface (it is not restored)"),
		duration:  durationFlag(fs, "duration", 0, 0, 0, "how long to measure; 0: until Ctrl-C or SIGTERM"),
		interval:  durationFlag(fs, "interval", xdp.DefaultInterval, 100*time.Millisecond, 0, "time between progress lines"),
		quiet:     fs.Bool("q", false, "no progress lines; with --json -, no text report either: the JSON alone (machine-only)"),
		listen:    fs.String("listen", "", "serve Prometheus metrics on ADDR/metrics while counting (e.g. 127.0.0.1:9464): frames, bytes and drops per class, malformed frames per reason, labelled by interface"),
		webConfig: webConfigFlag(fs),
		jsonPath:  fs.String("json", "", "also write the report as JSON to this file (-: standard output, and the text report goes to standard error)"),
	}
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), probeXDPUsage)
		printFlags(fs)
	}
	return f
}

// request is what the parsed flags of fs ask the probe for.
func (f *probeXDPFlags) request(fs *flag.FlagSet) xdp.Request {
	r := xdp.Request{
		Interface: *f.iface, Drop: *f.drop, AllowUDPPorts: *f.ports, DropEtherTypes: *f.ethTypes, PolicyFile: *f.polFile,
		Mode: *f.mode, Replace: *f.replace, Duration: *f.duration, Interval: *f.interval,
		Args: fs.Args(), Log: os.Stderr,
	}
	if !*f.quiet {
		r.Progress = os.Stderr
	}
	return r
}

func runProbeXDP(ctx context.Context, args []string) int {
	return runCommand(ctx, "probe xdp", args, newProbeXDPFlags, func(ctx context.Context, fs *flag.FlagSet, f *probeXDPFlags) (int, error) {
		return probeXDPRun(ctx, f.request(fs), f)
	})
}

// probeXDPRun checks req, counts and writes the reports; it returns the
// exit status.
func probeXDPRun(ctx context.Context, req xdp.Request, f *probeXDPFlags) (int, error) {
	if err := req.Validate(); err != nil {
		return 0, err
	}
	cfg, err := req.Config()
	if err != nil {
		return 0, err
	}
	// Checked before attaching, so that a bad path fails first.
	jsonOut, err := newOutput(*f.jsonPath, anyoneReads)
	if err != nil {
		return 0, err
	}
	opts := req.Options(cfg)
	m, err := serveProbeMetrics("hotlane probe xdp", *f.listen, *f.webConfig, *f.quiet, metrics.NewXDPCollector())
	if err != nil {
		return 0, err
	}
	defer m.close()
	opts.Live = m.live()
	rep, err := xdp.Run(ctx, cfg, opts)
	if err != nil {
		return 0, err
	}
	m.final(rep)
	return writeProbeReports(jsonOut, *f.quiet, rep.WriteText, rep.WriteJSON, rep.Interrupted)
}
