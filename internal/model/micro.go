package model

import "time"

// RoundUpToMicro rounds t up to the microsecond Postgres keeps, so that a
// stored instant (a task's due time, a schedule's occurrence) is never
// earlier than the one computed or asked.
func RoundUpToMicro(t time.Time) time.Time {
	if r := t.Truncate(time.Microsecond); !r.Equal(t) {
		return r.Add(time.Microsecond)
	}
	return t
}
