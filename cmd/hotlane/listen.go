package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotlane/hotlane/metrics"
)

// webConfigFlag defines --web-config beside a command's --listen.
func webConfigFlag(fs *flag.FlagSet) *string {
	return fs.String("web-config", "", "with --listen: serve with TLS and/or basic auth as this Prometheus exporter-toolkit web configuration `file` says (the format of node_exporter's --web.config.file)")
}

// serveMetrics serves c on addr/metrics for the command cmd, saying where
// on standard error unless quiet, and warning, even when quiet, when addr
// listens on every interface. The caller closes the server when done.
func serveMetrics(cmd, addr, webConfig string, quiet bool, c prometheus.Collector) (*metrics.Server, error) {
	cfg := metrics.DefaultServerConfig()
	cfg.WebConfigFile = webConfig
	srv, err := metrics.Serve(addr, cfg, c)
	if err != nil {
		return nil, err
	}
	if metrics.BindsEverywhere(addr) {
		fmt.Fprintf(os.Stderr, "%s: warning: --listen %s listens on every interface of this machine: whoever reaches any of its networks reads the metrics; "+
			"give a host (127.0.0.1:PORT, or this node's address) or --web-config for TLS and basic auth\n", cmd, addr)
	}
	switch {
	case quiet:
	case webConfig != "":
		fmt.Fprintf(os.Stderr, "%s: metrics on %s/metrics, with TLS and basic auth as %s says\n", cmd, srv.Addr, webConfig)
	default:
		fmt.Fprintf(os.Stderr, "%s: metrics on http://%s/metrics\n", cmd, srv.Addr)
	}
	return srv, nil
}
