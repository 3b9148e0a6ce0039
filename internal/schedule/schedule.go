// Package schedule reads the recurrence of a hookwheel schedule: a cron
// expression in an IANA time zone, or a fixed interval, and the instants it
// fires at.
//
// Cron expressions are parsed by github.com/robfig/cron/v3 (5 fields, 6 with
// seconds first, the @yearly ... @hourly descriptors); the fire times are
// computed here rather than by robfig's SpecSchedule.Next, which on
// daylight-saving-time days skips a time that does not exist (so "30 2 * * *"
// does not fire at all on the spring-forward day) and fires twice at a time
// that happens twice. The rules hookwheel applies instead are those of Vixie
// cron, the classic Unix cron daemon:
//
//   - A schedule that fires at set hours (its hour field is not `*`, as in
//     "30 2 * * *", "0 9-17 * * 1-5" or @daily) follows the wall clock. A
//     time that does not exist on the spring-forward day fires once, at the
//     first valid instant after it (the instant the clocks jump, e.g. 03:00
//     local time in Europe/Paris): several such times (every 15 minutes in
//     the missing hour) fire once between them. A time that happens twice on
//     the fall-back day fires once, at its first occurrence.
//   - A schedule that fires every hour or more often (its hour field is `*`,
//     as in "*/5 * * * *", "*/2 * * * * *" or @hourly) follows elapsed time:
//     it fires at every instant whose local time matches, so it keeps its
//     rhythm through both transitions. Nothing is skipped and nothing is
//     doubled: the hour that is lost on the spring-forward day is not there to
//     fire in, and the hour that repeats on the fall-back day is a different
//     hour of real time (a webhook "every hour at :30" is sent every 60
//     minutes, twice at 02:30 local time that night).
//   - @every <duration> is elapsed time from an anchor (the schedule's
//     creation, to the second), whatever the zone: anchor + k·duration, k ≥ 1.
//
// Schedules carry second precision: cron fire times are whole seconds.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	// The zone database goes into the binary, so that a schedule's time zone
	// means the same on a host without /usr/share/zoneinfo (a slim container).
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// MinEvery is the shortest @every interval.
const MinEvery = time.Second

// maxExprLength bounds a cron expression; real ones are a few dozen bytes.
const maxExprLength = 256

// parser reads 5 fields (seconds default to 0) or 6 with seconds first, and
// the descriptors. @every is read here, not by robfig, which silently rounds
// a sub-second interval up to a second.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Error is an invalid schedule: Field is "cron" or "timezone".
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Field + " " + e.Message }

// Schedule is a parsed recurrence. It is immutable and safe for concurrent use.
type Schedule struct {
	expr string
	loc  *time.Location
	// spec matches wall-clock times: it is evaluated in UTC on instants
	// whose UTC reading is the local reading in loc, where no DST exists.
	spec *cron.SpecSchedule
	// elapsed: the hour field is `*`, so the schedule follows elapsed time
	// rather than the wall clock (see the package documentation).
	elapsed bool
	// every and anchor define an @every schedule (every > 0).
	every  time.Duration
	anchor time.Time
}

// Parse reads a cron expression in the IANA time zone named timezone. anchor
// is the origin of an @every schedule (its creation); cron expressions ignore
// it. Errors are *Error, naming the field at fault.
func Parse(expr, timezone string, anchor time.Time) (*Schedule, error) {
	loc, err := LoadLocation(timezone)
	if err != nil {
		return nil, err
	}
	expr = strings.TrimSpace(expr)
	s := &Schedule{expr: expr, loc: loc}
	switch {
	case expr == "":
		return nil, &Error{"cron", "is required"}
	case len(expr) > maxExprLength:
		return nil, &Error{"cron", fmt.Sprintf("must be at most %d characters", maxExprLength)}
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return nil, &Error{"cron", "must not name a time zone: set the timezone field instead"}
	case expr == "@every" || strings.HasPrefix(expr, "@every "):
		d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(expr, "@every")))
		switch {
		case err != nil:
			return nil, &Error{"cron", "@every needs a duration such as 30s, 15m or 1h30m"}
		case d < MinEvery:
			return nil, &Error{"cron", fmt.Sprintf("@every must be at least %s", MinEvery)}
		}
		s.every, s.anchor = d, anchor.Truncate(time.Second)
		s.elapsed = true
		return s, nil
	}
	parsed, err := parser.Parse(expr)
	if err != nil {
		return nil, &Error{"cron", fmt.Sprintf("is not a valid cron expression (%v); expected 5 fields "+
			"(minute hour day-of-month month day-of-week), 6 with seconds first, a descriptor such as @daily, "+
			"or @every <duration>", err)}
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, &Error{"cron", "is not a valid cron expression"}
	}
	// A copy: the parser's result is ours, but be explicit that it now reads
	// wall-clock readings in UTC.
	utc := *spec
	utc.Location = time.UTC
	s.spec = &utc
	const allHours = 1<<24 - 1
	s.elapsed = utc.Hour&allHours == allHours
	// robfig gives up after five years without a match: such a schedule
	// names a date that never comes, such as 30 February.
	if utc.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, &Error{"cron", "never matches a real date (such as 30 February)"}
	}
	return s, nil
}

// locations caches loaded zones: time.LoadLocation reads the zone file on
// every call, and the materialiser parses schedules several times a second.
var locations sync.Map // name → *time.Location

// LoadLocation loads an IANA time zone such as "Europe/Paris" or "UTC".
// "Local" and "" are refused: a schedule must mean the same on every node.
// Errors are *Error for the field "timezone".
func LoadLocation(name string) (*time.Location, error) {
	if loc, ok := locations.Load(name); ok {
		return loc.(*time.Location), nil
	}
	if name == "" || name == "Local" || len(name) > 64 {
		return nil, &Error{"timezone", "must be an IANA time zone name such as Europe/Paris or UTC"}
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, &Error{"timezone", fmt.Sprintf("is not a known IANA time zone (such as Europe/Paris or UTC): %q", name)}
	}
	locations.Store(name, loc)
	return loc, nil
}

// String is the expression as parsed.
func (s *Schedule) String() string { return s.expr }

// Location is the schedule's time zone.
func (s *Schedule) Location() *time.Location { return s.loc }

// Next returns the first fire time strictly after after, in the schedule's
// time zone, or the zero time if there is none within about five years.
func (s *Schedule) Next(after time.Time) time.Time {
	var next time.Time
	switch {
	case s.every > 0:
		next = s.nextEvery(after)
	case s.elapsed:
		next = s.nextElapsed(after)
	default:
		next = s.nextWallClock(after)
	}
	if next.IsZero() {
		return next
	}
	return next.In(s.loc)
}

// NextN returns the first n fire times after after (fewer if the schedule
// ends).
func (s *Schedule) NextN(after time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for len(out) < n {
		after = s.Next(after)
		if after.IsZero() {
			break
		}
		out = append(out, after)
	}
	return out
}

// Last returns the latest fire time in [from, to], or the zero time if there
// is none. It costs about 64 calls of Next however long the range, which is
// what lets a schedule that was down for a month skip to its most recent
// occurrence without walking through every one it missed.
func (s *Schedule) Last(from, to time.Time) time.Time {
	if to.Before(from) {
		return time.Time{}
	}
	within := func(t time.Time) bool { return !t.IsZero() && !t.After(to) }
	// Invariant: Next(lo) is in range, Next(hi) is not. Next is monotonic,
	// so the latest lo is the one whose Next is the last fire time.
	lo, hi := from.Add(-time.Nanosecond), to
	if !within(s.Next(lo)) {
		return time.Time{}
	}
	for hi.Sub(lo) > time.Nanosecond {
		mid := lo.Add(hi.Sub(lo) / 2)
		if within(s.Next(mid)) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return s.Next(lo)
}

// nextEvery is anchor + k·every for the least k ≥ 1 that is after after.
func (s *Schedule) nextEvery(after time.Time) time.Time {
	if after.Before(s.anchor) {
		return s.anchor.Add(s.every)
	}
	k := after.Sub(s.anchor)/s.every + 1
	return s.anchor.Add(k * s.every)
}

// wallReading is the local reading of t in loc, as a UTC time: the instant
// whose UTC fields are t's local fields. offset is loc's offset at t.
func wallReading(t time.Time, loc *time.Location) (reading time.Time, offset time.Duration) {
	_, off := t.In(loc).Zone()
	offset = time.Duration(off) * time.Second
	return t.UTC().Add(offset), offset
}

// nextElapsed finds the first instant after after whose local reading
// matches, walking the zone's periods of constant offset: within one, the
// local reading is the instant plus a constant, so robfig's UTC arithmetic
// is exact; a match past the period's end is not a reading that period has,
// so the search goes on from the start of the next one.
func (s *Schedule) nextElapsed(after time.Time) time.Time {
	from := after
	inclusive := false
	// Two transitions a year: robfig's own five-year limit ends the search
	// long before this bound.
	for range 64 {
		reading, offset := wallReading(from, s.loc)
		if inclusive {
			reading = reading.Add(-time.Nanosecond)
		}
		match := s.spec.Next(reading)
		if match.IsZero() {
			return time.Time{}
		}
		at := match.Add(-offset)
		_, end := from.In(s.loc).ZoneBounds()
		if end.IsZero() || at.Before(end) {
			return at
		}
		from, inclusive = end, true
	}
	return time.Time{}
}

// maxWallClockSteps bounds the walk of nextWallClock through readings that
// fall in the first pass of a repeated hour: at most one hour (or two, in a
// zone that ever fell back two hours) of a seconds schedule.
const maxWallClockSteps = 3 * 3600

// nextWallClock finds the first matching local reading after after's whose
// instant (see resolve) is after after. Readings map to instants in order
// (resolve is monotonic), so that is the next fire time. Readings at or
// before after's own resolve to instants at or before after, except in the
// second pass of a repeated hour, where the readings ahead may resolve to
// their first pass, already gone: those are skipped, each fires once.
func (s *Schedule) nextWallClock(after time.Time) time.Time {
	reading, _ := wallReading(after, s.loc)
	for range maxWallClockSteps {
		reading = s.spec.Next(reading)
		if reading.IsZero() {
			return time.Time{}
		}
		if at := resolve(reading, s.loc); at.After(after) {
			return at
		}
	}
	return time.Time{}
}

// resolve returns the instant a local reading (given as a UTC time) stands
// for in loc: the instant itself when the reading happens once, the first of
// the two when it happens twice (a fall-back transition), and the first valid
// instant after it when it does not happen (a spring-forward transition: the
// instant of the jump).
func resolve(reading time.Time, loc *time.Location) time.Time {
	// Offsets lie within a day of UTC: start the walk through the zone's
	// periods a day before any instant the reading can stand for.
	t := reading.Add(-26 * time.Hour)
	for range 64 {
		local := t.In(loc)
		start, end := local.ZoneBounds()
		_, off := local.Zone()
		at := reading.Add(-time.Duration(off) * time.Second)
		if !start.IsZero() && at.Before(start) {
			// Too late for the previous period, too early for this one:
			// the reading falls in the gap between them.
			return start
		}
		if end.IsZero() || at.Before(end) {
			return at
		}
		t = end
	}
	// Unreachable with real zones: fall back on Go's own choice.
	return time.Date(reading.Year(), reading.Month(), reading.Day(), reading.Hour(), reading.Minute(),
		reading.Second(), reading.Nanosecond(), loc)
}

// IsError reports whether err is an invalid-schedule error, and returns it.
func IsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
