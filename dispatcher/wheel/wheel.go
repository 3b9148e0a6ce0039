// Package wheel fires callbacks at millisecond instants for millions of
// pending timers at a constant cost each: a hierarchical timing wheel (Wheel)
// and its concurrent driver (Timers). It is its own package because it knows
// nothing of tasks, claims or Postgres: the dispatcher keeps two of them (one
// to claim tasks ahead of time, one to send held claims on time), and the
// wheel's tests and benchmarks exercise it alone.
package wheel

import (
	"math"
	"math/bits"
	"slices"

	"github.com/google/uuid"
)

// The wheel's geometry. Level 0 has 256 slots of one tick (1 ms); each level
// above has 64 slots, each spanning a whole turn of the level below, as in the
// Linux timer wheel. Six levels cover 2^38 ms, about 8.7 years; anything
// further waits in one overflow list.
const (
	level0Bits = 8
	levelBits  = 6
	levels     = 6
	wheelBits  = level0Bits + (levels-1)*levelBits // 38

	level0Slots  = 1 << level0Bits
	levelSlots   = 1 << levelBits
	overflowSlot = level0Slots + (levels-1)*levelSlots // 576
	slotCount    = overflowSlot + 1

	// noTimer ends the free list.
	noTimer = -1
)

// timer is one pending expiry, 32 bytes. Timers live in one slice and link to
// each other by index rather than by pointer: the slice holds no pointers, so
// the garbage collector never scans it however many timers wait, and an index
// is half the size of a pointer.
//
// The first slotCount entries are not timers but the sentinels of the slots'
// circular lists, so a timer need not record its slot: unlinking it needs
// only its neighbours, and a slot is empty again when they are one and the
// same entry, its sentinel.
type timer struct {
	id         uuid.UUID
	at         int64 // the Unix millisecond asked for; fire reports it
	next, prev int32 // neighbours in the slot's list; next links the free list
}

// Wheel is a hierarchical timing wheel with a 1 ms tick: it keeps timers keyed
// by UUID and hands back, in order, those whose time has come.
//
// Add and Remove cost O(1) however many timers wait. A timer is filed by the
// highest bit in which its tick differs from the current tick: level 0 holds
// ticks within the current 256 ms block, level k those within the current
// level-(k+1) block but a later level-k slot. Every occupied slot therefore
// lies ahead of the current tick without wrapping, so the lowest set bit of a
// level's occupancy bitmap is that level's earliest slot, and Advance jumps
// straight to it: moving the clock by hours costs the timers that fire or
// move down a level (each descends at most five levels), not the
// milliseconds crossed.
//
// A Wheel is not safe for concurrent use.
type Wheel struct {
	// cur is the current tick, biased (see tick). Every pending timer's
	// effective tick, max(at, cur), is at or after it.
	cur uint64

	timers []timer // slot sentinels, then timers and free entries
	free   int32   // head of the list of reusable entries in timers
	index  map[uuid.UUID]int32
	// occupied has one bit per slot, in slot order: words 0–3 are level 0,
	// word 3+k is level k, and bit 0 of the last word is the overflow list.
	occupied [(slotCount + 63) / 64]uint64
	// overflowMin is at most the earliest tick in the overflow list, so that
	// Advance can jump to its block instead of visiting every block between.
	overflowMin uint64

	batch []firedTimer // reused by Advance
}

type firedTimer struct {
	id uuid.UUID
	at int64
}

// NewWheel returns an empty Wheel whose current tick is nowMs, in Unix
// milliseconds.
func NewWheel(nowMs int64) *Wheel {
	w := &Wheel{
		cur:         tick(nowMs),
		timers:      make([]timer, slotCount),
		free:        noTimer,
		index:       make(map[uuid.UUID]int32),
		overflowMin: math.MaxUint64,
	}
	for s := range int32(slotCount) {
		w.timers[s] = timer{next: s, prev: s}
	}
	return w
}

// tick maps Unix milliseconds onto uint64 so that the order of the results is
// the order of the int64s, negative ones included, and the level arithmetic
// can use unsigned shifts.
func tick(ms int64) uint64 { return uint64(ms) ^ 1<<63 }

func untick(t uint64) int64 { return int64(t ^ 1<<63) }

// Len returns the number of pending timers.
func (w *Wheel) Len() int { return len(w.index) }

// Contains reports whether a timer with this id is pending.
func (w *Wheel) Contains(id uuid.UUID) bool {
	_, ok := w.index[id]
	return ok
}

// Add schedules the timer id for atMs, in Unix milliseconds, replacing its
// previous time if it is already pending. A time at or before the current
// tick fires on the next Advance.
func (w *Wheel) Add(id uuid.UUID, atMs int64) {
	i, ok := w.index[id]
	if ok {
		w.unlink(i)
	} else {
		i = w.alloc()
		w.timers[i].id = id
		w.index[id] = i
	}
	w.timers[i].at = atMs
	w.place(i)
}

// Remove cancels the timer id and reports whether it was pending.
func (w *Wheel) Remove(id uuid.UUID) bool {
	i, ok := w.index[id]
	if !ok {
		return false
	}
	delete(w.index, id)
	w.unlink(i)
	w.release(i)
	return true
}

// Advance moves the current tick to nowMs and calls fire for every timer whose
// time is at or before it, in nondecreasing order of atMs, removing each
// before its call. A nowMs before the current tick still fires the timers
// that Add clamped to the current tick, and leaves the tick where it is.
//
// fire must not call Advance. It may call the other methods; a timer it adds
// for a time at or before nowMs fires within this same call.
func (w *Wheel) Advance(nowMs int64, fire func(id uuid.UUID, atMs int64)) {
	now := max(tick(nowMs), w.cur)
	for {
		slot, start, ok := w.nextEvent()
		if !ok || start > now {
			break
		}
		// Nothing is filed between cur and start (nextEvent returns the
		// earliest slot), so jumping there leaves every filing valid.
		w.cur = start
		if slot < level0Slots {
			w.fireSlot(slot, fire)
		} else {
			w.cascade(slot)
		}
	}
	w.cur = now
}

// NextDeadline returns a lower bound of the earliest pending time, in Unix
// milliseconds, and false when no timer is pending. The bound is exact when
// that time lies in the current tick's 256 ms block; otherwise it is the start
// of the span of the slot (or, beyond 2^38 ms, of the block) holding it, and
// an Advance to the bound moves the timer to a finer level so that the next
// call is closer: at most six such steps reach the exact time. A timer added
// for a past time makes the bound the current tick.
func (w *Wheel) NextDeadline() (ms int64, ok bool) {
	_, start, ok := w.nextEvent()
	if !ok {
		return 0, false
	}
	return untick(start), true
}

// nextEvent returns the earliest occupied slot and the tick at which the
// current tick enters it. Slots of a lower level always come before those of
// a higher one: a level-k slot lies within the current level-(k+1) block, every
// level-j slot for j > k lies in a later one, and overflowed timers lie beyond
// the current 2^38 ms block.
func (w *Wheel) nextEvent() (slot int, start uint64, ok bool) {
	for word := range level0Slots / 64 {
		if b := w.occupied[word]; b != 0 {
			slot = word*64 + bits.TrailingZeros64(b)
			return slot, w.cur&^(level0Slots-1) | uint64(slot), true
		}
	}
	for level := 1; level < levels; level++ {
		if b := w.occupied[level0Slots/64+level-1]; b != 0 {
			digit := bits.TrailingZeros64(b)
			shift := levelShift(level)
			block := w.cur >> (shift + levelBits) << (shift + levelBits)
			return level0Slots + (level-1)*levelSlots + digit, block | uint64(digit)<<shift, true
		}
	}
	if w.isOccupied(overflowSlot) {
		// Overflowed timers are refiled when the current tick enters the
		// block of 2^38 ms holding the earliest of them.
		return overflowSlot, w.overflowMin >> wheelBits << wheelBits, true
	}
	return 0, 0, false
}

func levelShift(level int) uint {
	return uint(level0Bits + (level-1)*levelBits)
}

func (w *Wheel) isOccupied(slot int) bool {
	return w.occupied[slot/64]&(1<<(slot%64)) != 0
}

// place files timer i in the slot for its tick relative to the current tick.
func (w *Wheel) place(i int32) {
	t := max(tick(w.timers[i].at), w.cur)
	var slot int
	switch diff := t ^ w.cur; {
	case diff < level0Slots:
		slot = int(t & (level0Slots - 1))
	case diff >= 1<<wheelBits:
		slot = overflowSlot
		w.overflowMin = min(w.overflowMin, t)
	default:
		level := (bits.Len64(diff)-1-level0Bits)/levelBits + 1
		digit := int(t>>levelShift(level)) & (levelSlots - 1)
		slot = level0Slots + (level-1)*levelSlots + digit
	}
	// Insert right after the sentinel: O(1), and order within a slot does
	// not matter (its timers share a tick, or are sorted when fired).
	s := int32(slot)
	first := w.timers[s].next
	w.timers[i].next, w.timers[i].prev = first, s
	w.timers[first].prev = i
	w.timers[s].next = i
	w.occupied[slot/64] |= 1 << (slot % 64)
}

func (w *Wheel) unlink(i int32) {
	next, prev := w.timers[i].next, w.timers[i].prev
	w.timers[prev].next = next
	w.timers[next].prev = prev
	if next == prev { // only the sentinel is left, and its index is the slot
		w.occupied[next/64] &^= 1 << (next % 64)
	}
}

// detach empties slot and returns the first and the end (the sentinel) of
// the chain it held, still linked by next.
func (w *Wheel) detach(slot int) (first, end int32) {
	s := int32(slot)
	first = w.timers[s].next
	w.timers[s].next, w.timers[s].prev = s, s
	w.occupied[slot/64] &^= 1 << (slot % 64)
	return first, s
}

// cascade refiles the timers of a higher-level slot (or of the overflow list)
// now that the current tick has entered it; they land on lower levels, or
// back in the overflow list if they lie beyond the new block.
func (w *Wheel) cascade(slot int) {
	if slot == overflowSlot {
		w.overflowMin = math.MaxUint64 // place lowers it again
	}
	for i, end := w.detach(slot); i != end; {
		next := w.timers[i].next
		w.place(i)
		i = next
	}
}

// fireSlot removes every timer of a level-0 slot and only then calls fire, so
// that fire may add and remove timers without meeting a half-unlinked list.
func (w *Wheel) fireSlot(slot int, fire func(uuid.UUID, int64)) {
	batch := w.batch[:0]
	for i, end := w.detach(slot); i != end; {
		tm := &w.timers[i]
		next := tm.next
		batch = append(batch, firedTimer{id: tm.id, at: tm.at})
		delete(w.index, tm.id)
		w.release(i)
		i = next
	}
	// A slot's timers share a tick, unless Add clamped past times to it; only
	// then does their order need fixing.
	if !slices.IsSortedFunc(batch, compareFired) {
		slices.SortStableFunc(batch, compareFired)
	}
	for _, f := range batch {
		fire(f.id, f.at)
	}
	// Keep the buffer for the next tick, unless a burst made it big.
	clear(batch)
	if cap(batch) > 4096 {
		batch = nil
	}
	w.batch = batch[:0]
}

func compareFired(a, b firedTimer) int {
	switch {
	case a.at < b.at:
		return -1
	case a.at > b.at:
		return 1
	}
	return 0
}

func (w *Wheel) alloc() int32 {
	if i := w.free; i != noTimer {
		w.free = w.timers[i].next
		return i
	}
	w.timers = append(w.timers, timer{})
	return int32(len(w.timers) - 1)
}

func (w *Wheel) release(i int32) {
	w.timers[i] = timer{next: w.free, prev: noTimer}
	w.free = i
}
