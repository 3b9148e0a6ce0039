package wheel

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/google/uuid"
)

const (
	benchResident = 1_000_000
	benchHourMs   = 3600 * 1000
)

// benchID makes distinct, well-spread ids without the cost of uuid.New, which
// would otherwise dominate what is measured.
func benchID(i uint64) uuid.UUID {
	var id uuid.UUID
	binary.LittleEndian.PutUint64(id[:8], i*0x9E3779B97F4A7C15)
	binary.LittleEndian.PutUint64(id[8:], i)
	return id
}

// benchOffsets returns random offsets within an hour, to be indexed modulo
// their length.
func benchOffsets() []int64 {
	rng := rand.New(rand.NewPCG(7, 7))
	offsets := make([]int64, 1<<16)
	for i := range offsets {
		offsets[i] = rng.Int64N(benchHourMs)
	}
	return offsets
}

// benchWheel returns a wheel holding benchResident timers spread over the hour
// after wheelT0, with ids benchID(0) to benchID(benchResident-1).
func benchWheel(offsets []int64) *Wheel {
	w := NewWheel(wheelT0)
	for i := range uint64(benchResident) {
		w.Add(benchID(i), wheelT0+offsets[i%uint64(len(offsets))])
	}
	return w
}

func BenchmarkWheelAdd(b *testing.B) {
	offsets := benchOffsets()
	b.Run("new", func(b *testing.B) {
		w := benchWheel(offsets)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range uint64(b.N) {
			w.Add(benchID(benchResident+i), wheelT0+offsets[i%uint64(len(offsets))])
		}
	})
	b.Run("move", func(b *testing.B) {
		w := benchWheel(offsets)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range uint64(b.N) {
			w.Add(benchID(i%benchResident), wheelT0+offsets[(i+1)%uint64(len(offsets))])
		}
	})
}

// BenchmarkWheelRemove adds and removes one timer per op among 1M resident.
func BenchmarkWheelRemove(b *testing.B) {
	offsets := benchOffsets()
	w := benchWheel(offsets)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range uint64(b.N) {
		id := benchID(benchResident + i)
		w.Add(id, wheelT0+offsets[i%uint64(len(offsets))])
		w.Remove(id)
	}
}

// BenchmarkWheelFire measures Advance per fired timer (ns/op is per timer),
// cascades included, with at least 1M timers resident.
func BenchmarkWheelFire(b *testing.B) {
	offsets := benchOffsets()
	b.Run("step=10ms", func(b *testing.B) {
		// Two hours of timers; each time the clock has crossed one hour,
		// another hour is added, so that 1M to 2M stay resident.
		w := NewWheel(wheelT0)
		next := uint64(0)
		fill := func(fromMs int64) {
			for range benchResident {
				w.Add(benchID(next), fromMs+offsets[next%uint64(len(offsets))])
				next++
			}
		}
		fill(wheelT0)
		fill(wheelT0 + benchHourMs)
		filledTo := wheelT0 + 2*benchHourMs
		now := wheelT0
		fired := 0
		count := func(uuid.UUID, int64) { fired++ }
		b.ReportAllocs()
		b.ResetTimer()
		for fired < b.N {
			if now >= filledTo-benchHourMs {
				b.StopTimer()
				fill(filledTo)
				filledTo += benchHourMs
				b.StartTimer()
			}
			now += 10
			w.Advance(now, count)
		}
	})
	b.Run("jump=1h", func(b *testing.B) {
		// 1M timers over an hour fired by one Advance.
		fired := 0
		count := func(uuid.UUID, int64) { fired++ }
		b.ReportAllocs()
		for fired < b.N {
			b.StopTimer()
			w := benchWheel(offsets)
			b.StartTimer()
			w.Advance(wheelT0+benchHourMs, count)
		}
	})
}

// BenchmarkWheelMemory reports the heap held per waiting timer with 1M
// timers spread over an hour: the timer slice, the id index and the slot
// heads together.
func BenchmarkWheelMemory(b *testing.B) {
	offsets := benchOffsets()
	var perTimer float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w := benchWheel(offsets)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(w)
		perTimer = float64(after.HeapAlloc-before.HeapAlloc) / benchResident
	}
	b.ReportMetric(perTimer, "bytes/timer")
}
