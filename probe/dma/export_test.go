package dma

// WithTables returns o with the probe's device, latency and stamp tables
// shrunk to the given entries, so that tests can force each table-full
// loss.
func WithTables(o Options, devices, hists, stamps uint32) Options {
	o.tables = tableSizes{devices, hists, stamps}
	return o
}
