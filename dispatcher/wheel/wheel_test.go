package wheel

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// wheelT0 is an arbitrary Unix millisecond that is not aligned to any level,
// so that level boundaries fall at odd offsets from it.
const wheelT0 = int64(1_900_000_123_457)

type wheelFired struct {
	id uuid.UUID
	at int64
}

// wheelAdvance advances w and returns what fired, failing if the order is
// not nondecreasing in at or a timer fired for a time after nowMs.
func wheelAdvance(t testing.TB, w *Wheel, nowMs int64) []wheelFired {
	t.Helper()
	var fired []wheelFired
	w.Advance(nowMs, func(id uuid.UUID, atMs int64) {
		require.False(t, w.Contains(id), "fired timer still pending")
		fired = append(fired, wheelFired{id, atMs})
	})
	for i := 1; i < len(fired); i++ {
		require.LessOrEqual(t, fired[i-1].at, fired[i].at, "fired out of order")
	}
	return fired
}

func wheelIDs(n int) []uuid.UUID {
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
	}
	return ids
}

func TestWheelOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		offsets []int64 // added in this order, relative to wheelT0
		advance int64
		want    []int64 // fired offsets, in order
	}{
		{"empty", nil, 1000, nil},
		{"same slot", []int64{5, 5, 5}, 5, []int64{5, 5, 5}},
		{"reverse insertion", []int64{3, 2, 1, 0}, 10, []int64{0, 1, 2, 3}},
		{"mixed levels", []int64{1 << 20, 300, 1, 1 << 14, 1 << 26, 70}, 1 << 27, []int64{1, 70, 300, 1 << 14, 1 << 20, 1 << 26}},
		{"stops at now", []int64{10, 11, 12}, 11, []int64{10, 11}},
		{"past-due first, in order", []int64{-5, 3, -100, 0}, 3, []int64{-100, -5, 0, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := NewWheel(wheelT0)
			for _, off := range tt.offsets {
				w.Add(uuid.New(), wheelT0+off)
			}
			var got []int64
			for _, f := range wheelAdvance(t, w, wheelT0+tt.advance) {
				got = append(got, f.at-wheelT0)
			}
			require.Equal(t, tt.want, got)
			require.Equal(t, len(tt.offsets)-len(tt.want), w.Len())
		})
	}
}

// TestWheelBoundaries puts a timer at, next to and across every level
// boundary, for aligned and unaligned starting ticks, and checks that it
// fires exactly at its time: not one tick before, and both when the clock
// steps there through NextDeadline and when it jumps there.
func TestWheelBoundaries(t *testing.T) {
	t.Parallel()
	var offsets []int64
	for shift := level0Bits; shift <= wheelBits+levelBits; shift += levelBits {
		b := int64(1) << shift
		offsets = append(offsets, b-1, b, b+1, 2*b-1, 2*b, 63*b+5)
	}
	offsets = append(offsets, 0, 1, 2, 255)
	starts := map[string]int64{
		"unaligned": wheelT0,
		"aligned":   1 << 40,
		"block end": 1<<40 - 1, // every level wraps on the first tick
	}
	for name, start := range starts {
		for _, off := range offsets {
			at := start + off
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				id := uuid.New()

				jump := NewWheel(start)
				jump.Add(id, at)
				if at > start {
					require.Empty(t, wheelAdvance(t, jump, at-1), "offset %d fired early", off)
				}
				require.Equal(t, []wheelFired{{id, at}}, wheelAdvance(t, jump, at), "offset %d", off)
				require.Zero(t, jump.Len())

				step := NewWheel(start)
				step.Add(id, at)
				steps := 0
				for step.Len() > 0 {
					next, ok := step.NextDeadline()
					require.True(t, ok)
					require.LessOrEqual(t, next, at, "NextDeadline is not a lower bound")
					fired := wheelAdvance(t, step, next)
					require.True(t, len(fired) == 0 || next == at, "offset %d fired at %d", off, next)
					steps++
				}
				require.LessOrEqual(t, steps, levels+1, "offset %d took %d steps", off, steps)
				_, ok := step.NextDeadline()
				require.False(t, ok)
			})
		}
	}
}

func TestWheelNextDeadlineExactOnLevel0(t *testing.T) {
	t.Parallel()
	w := NewWheel(1 << 30) // the start of a level-0 block
	_, ok := w.NextDeadline()
	require.False(t, ok)
	for _, off := range []int64{255, 200, 17, 1} {
		w.Add(uuid.New(), 1<<30+off)
		next, ok := w.NextDeadline()
		require.True(t, ok)
		require.Equal(t, int64(1<<30)+off, next)
	}
	w.Add(uuid.New(), 5) // long past
	next, ok := w.NextDeadline()
	require.True(t, ok)
	require.Equal(t, int64(1<<30), next, "a past-due timer is due at the current tick")
}

func TestWheelCascadesEveryLevel(t *testing.T) {
	t.Parallel()
	// One timer on each level and a few in overflow, all crossed by a
	// sequence of advances that lands on and just before each one.
	w := NewWheel(wheelT0)
	var ats []int64
	for shift := 0; shift <= wheelBits+12; shift += 3 {
		at := wheelT0 + int64(1)<<shift + int64(shift)
		ats = append(ats, at)
		w.Add(uuid.New(), at)
	}
	for _, at := range ats {
		require.Empty(t, wheelAdvance(t, w, at-1))
		fired := wheelAdvance(t, w, at)
		require.Len(t, fired, 1)
		require.Equal(t, at, fired[0].at)
	}
	require.Zero(t, w.Len())
}

func TestWheelFarFuture(t *testing.T) {
	t.Parallel()
	const year = int64(365 * 24 * 3600 * 1000)
	tests := []struct {
		name  string
		start int64
		at    int64
	}{
		{"ten years", wheelT0, wheelT0 + 10*year},
		{"a thousand years", wheelT0, wheelT0 + 1000*year},
		{"max int64", wheelT0, math.MaxInt64},
		{"across zero", -5 * year, 3 * year},
		{"from min int64", math.MinInt64, math.MinInt64 + 20*year},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := NewWheel(tt.start)
			id := uuid.New()
			w.Add(id, tt.at)
			near := uuid.New()
			w.Add(near, tt.start+1)
			require.Equal(t, []wheelFired{{near, tt.start + 1}}, wheelAdvance(t, w, tt.start+1))

			require.Empty(t, wheelAdvance(t, w, tt.at-1))
			require.True(t, w.Contains(id))
			require.Equal(t, []wheelFired{{id, tt.at}}, wheelAdvance(t, w, tt.at))
		})
	}
}

func TestWheelAddMoves(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		first  int64
		second int64
	}{
		{"earlier same level", 200, 100},
		{"later same level", 100, 200},
		{"down levels", 1 << 30, 10},
		{"up levels", 10, 1 << 30},
		{"into the past", 1 << 20, -1},
		{"same time", 77, 77},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := NewWheel(wheelT0)
			id := uuid.New()
			w.Add(id, wheelT0+tt.first)
			w.Add(id, wheelT0+tt.second)
			require.Equal(t, 1, w.Len())
			if tt.second > tt.first {
				require.Empty(t, wheelAdvance(t, w, wheelT0+tt.first))
			}
			all := wheelAdvance(t, w, wheelT0+max(tt.first, tt.second)+1<<31)
			require.Equal(t, []wheelFired{{id, wheelT0 + tt.second}}, all)
		})
	}
}

func TestWheelRemove(t *testing.T) {
	t.Parallel()
	w := NewWheel(wheelT0)
	ids := wheelIDs(5)
	for _, id := range ids {
		w.Add(id, wheelT0+10) // one slot list: head, middle and tail removals
	}
	w.Add(uuid.New(), wheelT0+1<<25)
	require.Equal(t, 6, w.Len())

	for _, i := range []int{4, 2, 0} {
		require.True(t, w.Remove(ids[i]))
		require.False(t, w.Contains(ids[i]))
		require.False(t, w.Remove(ids[i]), "second remove")
	}
	require.False(t, w.Remove(uuid.New()))
	require.Equal(t, 3, w.Len())

	fired := wheelAdvance(t, w, wheelT0+10)
	require.ElementsMatch(t, []wheelFired{{ids[1], wheelT0 + 10}, {ids[3], wheelT0 + 10}}, fired)

	// Removing the last timer of a slot empties it for NextDeadline.
	next, ok := w.NextDeadline()
	require.True(t, ok)
	require.Greater(t, next, wheelT0+10)
	for _, id := range ids {
		w.Remove(id)
	}
	require.Equal(t, 1, w.Len())
}

func TestWheelPastDue(t *testing.T) {
	t.Parallel()
	w := NewWheel(wheelT0)
	require.Empty(t, wheelAdvance(t, w, wheelT0+1000))
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	w.Add(a, wheelT0+1000) // the current tick, already advanced past once
	w.Add(b, wheelT0+5)
	w.Add(c, wheelT0+999)
	next, ok := w.NextDeadline()
	require.True(t, ok)
	require.Equal(t, wheelT0+1000, next)
	// Even an Advance to an earlier time fires them: they were due when added.
	require.Equal(t, []wheelFired{{b, wheelT0 + 5}, {c, wheelT0 + 999}, {a, wheelT0 + 1000}},
		wheelAdvance(t, w, wheelT0))
}

func TestWheelLargeJump(t *testing.T) {
	t.Parallel()
	const n = 100_000
	const day = 24 * 3600 * 1000
	rng := rand.New(rand.NewPCG(1, 2))
	w := NewWheel(wheelT0)
	for range n {
		w.Add(uuid.New(), wheelT0+rng.Int64N(day))
	}
	fired := wheelAdvance(t, w, wheelT0+day)
	require.Len(t, fired, n)
	require.Zero(t, w.Len())
}

func TestWheelFireMayAddAndRemove(t *testing.T) {
	t.Parallel()
	w := NewWheel(wheelT0)
	a, b, c, d := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	w.Add(a, wheelT0+1)
	w.Add(b, wheelT0+1)
	w.Add(c, wheelT0+3)
	var fired []uuid.UUID
	w.Advance(wheelT0+10, func(id uuid.UUID, _ int64) {
		fired = append(fired, id)
		if id == a || id == b {
			w.Remove(c)
			w.Remove(a) // no longer pending: a no-op
			if !w.Contains(d) {
				w.Add(d, wheelT0+2)
			}
		}
	})
	require.ElementsMatch(t, []uuid.UUID{a, b, d}, fired)
	require.Equal(t, d, fired[2])
	require.Zero(t, w.Len())
}

// wheelModel is the reference: a plain map, sorted on every advance.
type wheelModel struct {
	cur    int64
	timers map[uuid.UUID]int64
}

func (m *wheelModel) advance(now int64) []wheelFired {
	now = max(now, m.cur)
	var fired []wheelFired
	for id, at := range m.timers {
		if at <= now {
			fired = append(fired, wheelFired{id, at})
			delete(m.timers, id)
		}
	}
	m.cur = now
	return fired
}

func sortFired(f []wheelFired) {
	slices.SortFunc(f, func(a, b wheelFired) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return slices.Compare(a.id[:], b.id[:])
	})
}

// checkWheelInvariants verifies the filing rules that make Advance and
// NextDeadline correct without scanning.
func checkWheelInvariants(t *testing.T, w *Wheel) {
	t.Helper()
	count := 0
	for slot := range slotCount {
		s := int32(slot)
		sentinel := w.timers[s]
		require.Equal(t, sentinel.next != s, w.isOccupied(slot), "bitmap of slot %d", slot)
		prev := s
		for i := sentinel.next; i != s; i = w.timers[i].next {
			tm := w.timers[i]
			require.GreaterOrEqual(t, i, int32(slotCount))
			require.Equal(t, prev, tm.prev)
			require.Equal(t, i, w.index[tm.id])
			eff := max(tick(tm.at), w.cur)
			diff := eff ^ w.cur
			switch {
			case slot < level0Slots:
				require.Less(t, diff, uint64(level0Slots))
				require.GreaterOrEqual(t, eff, w.cur)
			case slot == overflowSlot:
				require.GreaterOrEqual(t, diff, uint64(1)<<wheelBits)
				require.GreaterOrEqual(t, eff, w.overflowMin)
			default:
				level := (slot-level0Slots)/levelSlots + 1
				top := bits.Len64(diff) - 1
				require.GreaterOrEqual(t, top, int(levelShift(level)))
				require.Less(t, top, int(levelShift(level))+levelBits)
			}
			prev = i
			count++
		}
		require.Equal(t, prev, sentinel.prev, "tail of slot %d", slot)
	}
	require.Equal(t, len(w.index), count)
	free := 0
	for i := w.free; i != noTimer; i = w.timers[i].next {
		free++
	}
	require.Equal(t, len(w.timers)-slotCount, count+free, "entries leaked")
}

func TestWheelMatchesModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(8) {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 99))
			w := NewWheel(wheelT0)
			m := &wheelModel{cur: wheelT0, timers: map[uuid.UUID]int64{}}
			var ids []uuid.UUID // every id ever added, for removes and re-adds
			now := wheelT0

			// Distances from the current time spanning all levels and overflow,
			// weighted towards the short ones a dispatcher sees most.
			distance := func() int64 {
				switch rng.IntN(10) {
				case 0:
					return -rng.Int64N(1000) // past-due
				case 1:
					return rng.Int64N(1 << 45) // overflow and top levels
				case 2, 3:
					return rng.Int64N(1 << 22)
				default:
					return rng.Int64N(600)
				}
			}
			for op := range 20_000 {
				switch r := rng.IntN(100); {
				case r < 45 || len(ids) == 0:
					id := uuid.New()
					ids = append(ids, id)
					at := now + distance()
					w.Add(id, at)
					m.timers[id] = at
				case r < 55:
					id := ids[rng.IntN(len(ids))]
					at := now + distance()
					w.Add(id, at)
					m.timers[id] = at
				case r < 70:
					id := ids[rng.IntN(len(ids))]
					_, want := m.timers[id]
					delete(m.timers, id)
					require.Equal(t, want, w.Remove(id))
				default:
					// Mostly small steps, sometimes the driver's step to the
					// next deadline, sometimes a jump of up to days or back.
					switch rng.IntN(10) {
					case 0:
						now += rng.Int64N(1 << 28)
					case 1:
						if next, ok := w.NextDeadline(); ok {
							now = max(now, next)
						}
					case 2:
						now -= rng.Int64N(100)
					default:
						now += rng.Int64N(300)
					}
					got := wheelAdvance(t, w, now)
					want := m.advance(now)
					sortFired(got)
					sortFired(want)
					require.Equal(t, want, got, "op %d", op)
				}
				require.Equal(t, len(m.timers), w.Len())
				if op%8 != 0 {
					continue // the scan of the model below dominates the run time
				}
				if next, ok := w.NextDeadline(); ok {
					earliest := int64(math.MaxInt64)
					for _, at := range m.timers {
						earliest = min(earliest, max(at, m.cur))
					}
					require.LessOrEqual(t, next, earliest, "NextDeadline above the earliest timer")
					require.GreaterOrEqual(t, next, m.cur)
					if tick(earliest)^w.cur < level0Slots {
						require.Equal(t, earliest, next, "NextDeadline not exact on level 0")
					}
				} else {
					require.Empty(t, m.timers)
				}
				if op%512 == 0 {
					checkWheelInvariants(t, w)
				}
			}
			// Drain everything, far-future timers included.
			got := wheelAdvance(t, w, math.MaxInt64)
			want := m.advance(math.MaxInt64)
			sortFired(got)
			sortFired(want)
			require.Equal(t, want, got)
			require.Zero(t, w.Len())
			checkWheelInvariants(t, w)
		})
	}
}
