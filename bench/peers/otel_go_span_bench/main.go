// bench/peers/otel_go_span_bench - the span_bench "attrs5" scenario in the OpenTelemetry Go SDK,
// for docs/PERFORMANCE.md ("Peers side by side"): span start + 5 attributes (string, int,
// double, bool, string) + end, through a BatchSpanProcessor (queue 65536, batch 512, delay
// 10 ms, export timeout 30 s, non-blocking: a full queue drops, as weft's does) into an exporter
// that discards. 1 and 2 recording goroutines, each pinned to an OS thread (LockOSThread) so
// that its thread's CPU time is the goroutine's.
//
// Timed like bench/span_bench.c: each goroutine records min(spans/threads/10, 20000) spans to
// warm up, then all start together; wall time runs from the start until the last goroutine has
// recorded its share (the processor's goroutine exports meanwhile; the shutdown's final drain is
// outside the timed part, as in span_bench). ns_per_span is the median over the runs of wall
// time / spans per goroutine; cpu_ns_per_span the recording threads' CPU time
// (CLOCK_THREAD_CPUTIME_ID) per span; allocs_per_span the Go heap allocations of the whole
// process (runtime.MemStats.Mallocs) during the timed part, per span; dropped the spans recorded
// but never exported (queue full), summed over the runs.
//
// Built offline from Debian 12's golang-go (Go 1.19) and golang-opentelemetry-otel-dev (the SDK's
// sources under /usr/share/gocode/src) in GOPATH mode; scripts/bench-peers.sh does it:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=build/peers/go-cache GOPROXY=off \
//	  go build -o build/peers/otel_go_span_bench ./bench/peers/otel_go_span_bench
//
// Usage: otel_go_span_bench [spans_per_run] [runs] [only]   (defaults 1000000, 5, both cases;
// only: "attrs5:1" or "attrs5:2"). Prints one JSON object per line, like span_bench.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sys/unix"
)

// discardExporter counts what it is handed and drops it.
type discardExporter struct{ exported int64 }

func (e *discardExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	atomic.AddInt64(&e.exported, int64(len(spans)))
	return nil
}

func (e *discardExporter) Shutdown(context.Context) error { return nil }

// The attribute keys, made once as an application would (attribute.Key is a string type).
var (
	keyOp     = attribute.Key("gen_ai.operation.name")
	keyID     = attribute.Key("weft.step.id")
	keyScore  = attribute.Key("weft.step.score")
	keyFinal  = attribute.Key("weft.step.final")
	keyStatus = attribute.Key("weft.step.status")
)

// recordOne is the measured call sequence: one setter call per attribute, as span_bench and
// the JS version make (SetAttributes also takes several at once).
//
//go:noinline
func recordOne(ctx context.Context, tracer trace.Tracer, i int) {
	_, s := tracer.Start(ctx, "invoke_agent planner")
	s.SetAttributes(keyOp.String("invoke_agent"))
	s.SetAttributes(keyID.Int64(int64(i)))
	s.SetAttributes(keyScore.Float64(0.75))
	s.SetAttributes(keyFinal.Bool(true))
	s.SetAttributes(keyStatus.String("completed"))
	s.End()
}

func threadCPUNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

type result struct {
	wallNs   float64
	cpuNs    float64 // recording threads' CPU time in the timed part, summed
	allocs   uint64
	recorded int64 // warm-up and timed spans
	exported int64
}

func timedRun(threads, perThread int) result {
	exp := &discardExporter{}
	bsp := sdktrace.NewBatchSpanProcessor(exp,
		sdktrace.WithMaxQueueSize(1<<16),
		sdktrace.WithMaxExportBatchSize(512),
		sdktrace.WithBatchTimeout(10*time.Millisecond),
		sdktrace.WithExportTimeout(30*time.Second))
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(bsp))
	tracer := provider.Tracer("span_bench", trace.WithInstrumentationVersion(otel.Version()))
	warmup := perThread / 10
	if warmup > 20000 {
		warmup = 20000
	}
	var ready, done sync.WaitGroup
	var cpuNs int64
	start := make(chan struct{})
	ready.Add(threads)
	done.Add(threads)
	for t := 0; t < threads; t++ {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ctx := context.Background()
			for i := 0; i < warmup; i++ {
				recordOne(ctx, tracer, i)
			}
			ready.Done()
			<-start
			cpu0 := threadCPUNs()
			for i := 0; i < perThread; i++ {
				recordOne(ctx, tracer, i)
			}
			atomic.AddInt64(&cpuNs, threadCPUNs()-cpu0)
		}()
	}
	ready.Wait()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs0 := ms.Mallocs
	t0 := time.Now()
	close(start)
	done.Wait()
	wall := time.Since(t0)
	runtime.ReadMemStats(&ms)
	res := result{
		wallNs:   float64(wall.Nanoseconds()),
		cpuNs:    float64(atomic.LoadInt64(&cpuNs)),
		allocs:   ms.Mallocs - mallocs0,
		recorded: int64(threads) * int64(warmup+perThread),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := provider.Shutdown(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "otel_go_span_bench: shutdown:", err)
		os.Exit(1)
	}
	res.exported = atomic.LoadInt64(&exp.exported)
	return res
}

func median(xs []float64) float64 {
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

func round1(x float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 1, 64), 64)
	return v
}

var oneThreadRate float64

func benchHotPath(threads, spans, runs int) {
	perThread := spans / threads
	nsPerSpan := make([]float64, runs)
	cpuPerSpan := make([]float64, runs)
	rate := make([]float64, runs)
	var dropped int64
	var allocs uint64
	for r := 0; r < runs; r++ {
		res := timedRun(threads, perThread)
		nsPerSpan[r] = res.wallNs / float64(perThread)
		cpuPerSpan[r] = res.cpuNs / float64(perThread*threads)
		rate[r] = float64(perThread*threads) / (res.wallNs / 1e9)
		dropped += res.recorded - res.exported
		allocs += res.allocs
	}
	medianRate := median(rate)
	if threads == 1 {
		oneThreadRate = medianRate
	}
	scaling := 0.0
	if oneThreadRate > 0 {
		scaling = medianRate / oneThreadRate
	}
	sort.Float64s(nsPerSpan)
	// encoding/json keeps the fields in this order (a struct, not a map).
	line := struct {
		Bench         string  `json:"bench"`
		Case          string  `json:"case"`
		Threads       int     `json:"threads"`
		SDK           string  `json:"sdk"`
		SDKVersion    string  `json:"sdk_version"`
		Go            string  `json:"go"`
		NsPerSpan     float64 `json:"ns_per_span"`
		NsPerSpanMin  float64 `json:"ns_per_span_min"`
		NsPerSpanMax  float64 `json:"ns_per_span_max"`
		CPUNsPerSpan  float64 `json:"cpu_ns_per_span"`
		SpansPerSec   int64   `json:"spans_per_sec"`
		Scaling       float64 `json:"scaling"`
		AllocsPerSpan float64 `json:"allocs_per_span"`
		Dropped       int64   `json:"dropped"`
		Runs          int     `json:"runs"`
		SpansPerRun   int     `json:"spans_per_run"`
	}{
		Bench: "otel_go_span_bench", Case: "attrs5", Threads: threads,
		SDK: "go.opentelemetry.io/otel/sdk " + otel.Version(), SDKVersion: otel.Version(),
		Go: runtime.Version(), NsPerSpan: round1(nsPerSpan[runs/2]),
		NsPerSpanMin: round1(nsPerSpan[0]), NsPerSpanMax: round1(nsPerSpan[runs-1]),
		CPUNsPerSpan: round1(median(cpuPerSpan)), SpansPerSec: int64(medianRate + 0.5),
		Scaling: float64(int64(scaling*100+0.5)) / 100,
		AllocsPerSpan: float64(int64(float64(allocs)/float64(perThread*threads*runs)*1000+0.5)) /
			1000,
		Dropped: dropped, Runs: runs, SpansPerRun: perThread * threads,
	}
	out, err := json.Marshal(line)
	if err != nil {
		fmt.Fprintln(os.Stderr, "otel_go_span_bench:", err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}

func main() {
	spans, runs, only := 1000000, 5, ""
	var err error
	if len(os.Args) > 1 {
		if spans, err = strconv.Atoi(os.Args[1]); err != nil {
			spans = 0
		}
	}
	if len(os.Args) > 2 {
		if runs, err = strconv.Atoi(os.Args[2]); err != nil {
			runs = 0
		}
	}
	if len(os.Args) > 3 {
		only = os.Args[3]
	}
	if spans < 8 || runs < 1 || runs > 31 ||
		(only != "" && only != "attrs5:1" && only != "attrs5:2") {
		fmt.Fprintln(os.Stderr,
			"usage: otel_go_span_bench [spans_per_run >= 8] [runs 1..31] [attrs5:1|attrs5:2]")
		os.Exit(2)
	}
	for _, threads := range []int{1, 2} {
		if only == "" || only == fmt.Sprintf("attrs5:%d", threads) {
			benchHotPath(threads, spans, runs)
		}
	}
}
