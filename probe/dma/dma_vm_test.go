package dma_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/probe/dma"
	"github.com/hotlane/hotlane/vm/vmtest"
)

// TestVM boots the 7.3 VM kernel once with an emulated NVMe disk (real DMA
// through the DMA API, unlike the virtio devices) and runs the TestGuest*
// tests inside it.
func TestVM(t *testing.T) {
	img := filepath.Join(t.TempDir(), "nvme.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	vmtest.RunGuestTests(t, vmtest.Options{
		Run:     "^TestGuest",
		Timeout: 10 * time.Minute,
		QemuArgs: []string{
			"-drive", "file=" + img + ",if=none,id=nvm,format=raw",
			"-device", "nvme,serial=hltest,drive=nvm",
		},
	})
}

const nvmeDisk = "/dev/nvme0n1"

// nvmeDevice waits for the NVMe namespace and returns the name of the PCI
// device that does its DMA (what dev_name() says, e.g. 0000:00:04.0).
func nvmeDevice(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(nvmeDisk); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", nvmeDisk)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// With native multipath the namespace hangs off the subsystem; the
	// controller points at the PCI device.
	p, err := filepath.EvalSymlinks("/sys/class/nvme/nvme0/device")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Base(p)
}

// writeDirect writes total bytes to the disk in chunk-sized O_DIRECT
// writes from a page-aligned buffer, then fsyncs: every byte goes to the
// device by DMA, none stays in the page cache.
func writeDirect(t *testing.T, total, chunk int) uint64 {
	t.Helper()
	directIO(t, true, total, chunk)
	return uint64(total)
}

// readDirect reads total bytes from the disk the same way: every byte
// comes from the device by DMA.
func readDirect(t *testing.T, total, chunk int) {
	t.Helper()
	directIO(t, false, total, chunk)
}

func directIO(t *testing.T, write bool, total, chunk int) {
	t.Helper()
	flags := os.O_RDONLY
	if write {
		flags = os.O_WRONLY
	}
	f, err := os.OpenFile(nvmeDisk, flags|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf, err := unix.Mmap(-1, 0, chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for off := 0; off < total; off += chunk {
		if write {
			_, err = f.WriteAt(buf, int64(off))
		} else {
			_, err = f.ReadAt(buf, int64(off))
		}
		if err != nil {
			t.Fatalf("direct I/O at %d: %v", off, err)
		}
	}
	if write {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkNVMe applies the plausibility rule to what the probe saw on the NVMe
// device while written bytes went to it, and nothing else used the disk:
//
//   - every written byte is DMA-mapped toward the device at least once, so
//     TO_DEVICE bytes mapped >= bytes written; nothing else writes, so they
//     are also below twice that (PRP lists come from a dma_pool, whose
//     pages are allocated, not mapped, so they add nothing here);
//   - the writes are synchronous, so every request has completed when the
//     probe is read. The 7.x NVMe driver unmaps a single-segment request
//     on completion, but skips unmapping multi-segment requests when
//     dma_need_unmap() says the unmap is a no-op (dma-direct without
//     bounce buffers, as in this VM). So singleSeg 4 KiB writes give at
//     least singleSeg unmaps of 4 KiB, and there are never more unmaps
//     than maps; allSingle says every write was single-segment, so
//     unmaps must equal maps, byte for byte;
//   - nothing failed, and nothing was lost.
func checkNVMe(t *testing.T, res *dma.Result, dev string, written, singleSeg uint64, allSingle bool) dma.Device {
	t.Helper()
	d, ok := res.Device(dev)
	if !ok {
		var names []string
		for _, x := range res.Devices {
			names = append(names, x.Name)
		}
		t.Fatalf("no DMA activity on %s; devices seen: %v", dev, names)
	}
	to := d.Direction("TO_DEVICE")
	t.Logf("%s: %d maps (%d sg), %d unmaps, %d allocs, %d frees; TO_DEVICE %d maps %d bytes for %d written (%.3fx); unmapped %d bytes; latency %d samples p50 %v p99 %v",
		dev, d.Maps, d.SGMaps, d.Unmaps, d.Allocs, d.Frees, to.Maps, to.BytesMapped, written,
		float64(to.BytesMapped)/float64(written), d.BytesUnmapped, d.MapLatency.Samples, d.MapLatency.P50, d.MapLatency.P99)
	if to.Maps == 0 {
		t.Errorf("no TO_DEVICE mappings on %s", dev)
	}
	if to.BytesMapped < written || to.BytesMapped >= 2*written {
		t.Errorf("TO_DEVICE bytes mapped = %d, want in [%d, %d): every written byte is mapped once, nothing else writes",
			to.BytesMapped, written, 2*written)
	}
	if d.Unmaps > d.Maps || d.BytesUnmapped > d.BytesMapped {
		t.Errorf("unmaps %d (%d bytes) > maps %d (%d bytes)", d.Unmaps, d.BytesUnmapped, d.Maps, d.BytesMapped)
	}
	if d.Unmaps < singleSeg || d.BytesUnmapped < 4096*singleSeg {
		t.Errorf("unmaps %d (%d bytes), want at least %d of 4 KiB: the driver unmaps single-segment requests", d.Unmaps, d.BytesUnmapped, singleSeg)
	}
	if allSingle && (d.Unmaps != d.Maps || d.BytesUnmapped != d.BytesMapped) {
		t.Errorf("unmaps %d (%d bytes) != maps %d (%d bytes) after single-segment writes", d.Unmaps, d.BytesUnmapped, d.Maps, d.BytesMapped)
	}
	if d.Errors() != 0 {
		t.Errorf("%d failed DMA calls", d.Errors())
	}
	if n := res.Losses.Total(); n != 0 {
		t.Errorf("lost events: %+v", res.Losses)
	}
	if d.MappedBytesPerSec <= 0 {
		t.Errorf("mapped bytes per second = %v", d.MappedBytesPerSec)
	}
	return d
}

// The CLI as a user runs it: default hooks (tp_btf on this kernel, with
// fentry/fexit map latency), stopped with Ctrl-C, JSON result.
func TestGuestCLISeesNVMeWrites(t *testing.T) {
	vmtest.RequireGuest(t)
	dev := nvmeDevice(t)
	jsonPath := filepath.Join(t.TempDir(), "dma.json")
	cmd := exec.Command(vmtest.HotlaneGuestPath, "probe", "dma", "--interval", "1s", "--json", jsonPath)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	attached := make(chan string, 1)
	var errLines strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			errLines.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "attached") {
				select {
				case attached <- sc.Text():
				default:
				}
			}
		}
	}()
	select {
	case line := <-attached:
		t.Log(line)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		<-done
		t.Fatalf("probe did not attach:\n%s", errLines.String())
	}

	// 8 MiB in 1 MiB writes (multi-segment requests), then 1 MiB in
	// 4 KiB writes (single-segment).
	written := writeDirect(t, 8<<20, 1<<20) + writeDirect(t, 1<<20, 4096)
	time.Sleep(1500 * time.Millisecond) // one progress line at least
	cmd.Process.Signal(syscall.SIGINT)
	<-done
	if err := cmd.Wait(); err != nil {
		t.Fatalf("hotlane probe dma: %v\n%s", err, errLines.String())
	}
	t.Logf("stderr:\n%sreport:\n%s", errLines.String(), stdout.String())
	if !strings.Contains(errLines.String(), "dma ") || !strings.Contains(stdout.String(), dev) {
		t.Errorf("no progress line, or %s missing from the report:\nstderr:\n%s", dev, errLines.String())
	}

	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var res dma.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("JSON result: %v\n%s", err, raw)
	}
	if res.Family != dma.HooksTpBTF {
		t.Errorf("family %q, want tp_btf on the 7.3 kernel", res.Family)
	}
	d := checkNVMe(t, &res, dev, written, 256, false)
	if !res.LatencyMeasured || d.MapLatency.Samples == 0 {
		t.Errorf("map latency not measured (fentry works in the VM): latency hooks %v, notes %v", res.LatencyHooks, res.Notes)
	}
	if d.MapLatency.Samples > 0 && d.MapLatency.Samples != d.Maps+d.MapErrors {
		// Every map call of the device went through a hooked map
		// function, so each has one latency sample.
		t.Errorf("latency samples %d, want one per map call (%d)", d.MapLatency.Samples, d.Maps+d.MapErrors)
	}
}

// The fallback for kernels without dma:* tracepoints: fexit counts.
func TestGuestFentryFallbackSeesNVMeWrites(t *testing.T) {
	vmtest.RequireGuest(t)
	dev := nvmeDevice(t)
	pr, err := dma.Start(dma.Options{Hooks: dma.HooksFentry, Latency: dma.LatencyOn})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	t.Logf("hooks %v, latency %v, notes %v", pr.Hooks(), pr.LatencyHooks(), pr.Notes())
	written := writeDirect(t, 4<<20, 512<<10) + writeDirect(t, 256<<10, 4096)
	res, err := pr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.Close(); err != nil {
		t.Fatal(err)
	}
	d := checkNVMe(t, res, dev, written, 64, false)
	if d.MapLatency.Samples == 0 {
		t.Error("no map latency samples with fentry/fexit")
	}
}

// Classic tracepoints through tracefs, with map latency off.
func TestGuestTracepointSeesNVMeWrites(t *testing.T) {
	vmtest.RequireGuest(t)
	dev := nvmeDevice(t)
	pr, err := dma.Start(dma.Options{Hooks: dma.HooksTracepoint, Latency: dma.LatencyOff})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	written := writeDirect(t, 1<<20, 4096)
	res, err := pr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	pr.Close()
	d := checkNVMe(t, res, dev, written, 256, true)
	if res.LatencyMeasured || d.MapLatency.Samples != 0 {
		t.Errorf("latency measured with --latency off")
	}
}

// Full tables lose events, and the report counts each loss: with one
// device slot, the disk's writes (TO_DEVICE) take it and its reads
// (FROM_DEVICE) are lost; with one latency cell, every sample in another
// cell is lost; with the one stamp slot taken, every map call loses its
// latency sample. The report's text and JSON both say so.
func TestGuestFullTablesAreCounted(t *testing.T) {
	vmtest.RequireGuest(t)
	nvmeDevice(t)
	pr, err := dma.Start(dma.WithTables(dma.Options{Hooks: dma.HooksTpBTF, Latency: dma.LatencyOn}, 1, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	writeDirect(t, 1<<20, 4096)
	writeDirect(t, 2<<20, 512<<10)
	readDirect(t, 1<<20, 4096)
	res, err := pr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.Close(); err != nil {
		t.Fatal(err)
	}
	lost := map[string]uint64{}
	for _, l := range res.Losses {
		lost[l.What] = l.Count
	}
	t.Logf("losses: %v", lost)
	for _, what := range []string{"device table full", "latency table full"} {
		if lost[what] == 0 {
			t.Errorf("%s: nothing counted with a one-entry table (losses %v)", what, lost)
		}
	}
	if len(res.Devices) != 1 {
		t.Errorf("%d device rows with a one-entry device table, want 1", len(res.Devices))
	}
	var text, js strings.Builder
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "device table full") || !strings.Contains(text.String(), "latency table full") {
		t.Errorf("the text report does not name the losses:\n%s", text.String())
	}
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Losses []struct {
			What  string `json:"what"`
			Count uint64 `json:"count"`
		} `json:"losses"`
	}
	if err := json.Unmarshal([]byte(js.String()), &back); err != nil {
		t.Fatal(err)
	}
	for _, l := range back.Losses {
		if l.Count != lost[l.What] {
			t.Errorf("JSON loss %q = %d, text says %d", l.What, l.Count, lost[l.What])
		}
	}

	// A full stamp table: one entry, taken before the run.
	pr, err = dma.Start(dma.WithTables(dma.Options{Hooks: dma.HooksTpBTF, Latency: dma.LatencyOn}, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if err := dma.FillStampTable(pr); err != nil {
		t.Fatal(err)
	}
	writeDirect(t, 256<<10, 4096)
	res, err = pr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	pr.Close()
	var stampFull, maps uint64
	for _, l := range res.Losses {
		if l.What == "latency stamp table full" {
			stampFull = l.Count
		}
	}
	for _, d := range res.Devices {
		maps += d.Maps + d.MapErrors
	}
	t.Logf("stamp table full %d for %d map calls", stampFull, maps)
	// Every map call needed a stamp, and none could have one.
	if stampFull == 0 || stampFull < maps {
		t.Errorf("stamp table full counted %d times for %d map calls", stampFull, maps)
	}
}
