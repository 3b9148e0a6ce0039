package schedule_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/schedule"
)

// utc parses an RFC 3339 instant; the expected instants below are written
// out in UTC with their local reading beside them.
func utc(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return at
}

// The 2026 transitions these tests cross (from the zone database):
//
//	Europe/Paris      2026-03-29 01:00Z  02:00 CET  → 03:00 CEST (02:00-02:59 does not exist)
//	                  2026-10-25 01:00Z  03:00 CEST → 02:00 CET  (02:00-02:59 happens twice)
//	America/New_York  2026-03-08 07:00Z  02:00 EST  → 03:00 EDT
//	                  2026-11-01 06:00Z  02:00 EDT  → 01:00 EST  (01:00-01:59 happens twice)
//	America/Santiago  2026-09-06 04:00Z  00:00 -04  → 01:00 -03  (midnight does not exist)
//	Australia/Lord_Howe 2026-10-03 15:30Z 02:00 +10:30 → 02:30 +11 (half an hour)
//	                  2026-04-04 15:00Z  02:00 +11 → 01:30 +10:30
func TestNextAcrossDST(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cron string
		zone string
		from string
		// want are the next fire times after from, in UTC; the comment on
		// each line is its local reading.
		want []string
	}{
		{
			name: "Paris spring forward: 02:30 does not exist and fires once at 03:00 CEST",
			cron: "30 2 * * *", zone: "Europe/Paris", from: "2026-03-27T12:00:00Z",
			want: []string{
				"2026-03-28T01:30:00Z", // 02:30 CET
				"2026-03-29T01:00:00Z", // 03:00 CEST: 02:30 does not exist, the clocks jump at 02:00 CET
				"2026-03-30T00:30:00Z", // 02:30 CEST
				"2026-03-31T00:30:00Z", // 02:30 CEST
			},
		},
		{
			name: "Paris fall back: 02:30 happens twice and fires once, the first time",
			cron: "30 2 * * *", zone: "Europe/Paris", from: "2026-10-23T12:00:00Z",
			want: []string{
				"2026-10-24T00:30:00Z", // 02:30 CEST
				"2026-10-25T00:30:00Z", // 02:30 CEST, the first 02:30 (not 01:30Z, the second)
				"2026-10-26T01:30:00Z", // 02:30 CET
				"2026-10-27T01:30:00Z", // 02:30 CET
			},
		},
		{
			name: "New York spring forward: 02:30 fires at 03:00 EDT",
			cron: "30 2 * * *", zone: "America/New_York", from: "2026-03-06T12:00:00Z",
			want: []string{
				"2026-03-07T07:30:00Z", // 02:30 EST
				"2026-03-08T07:00:00Z", // 03:00 EDT
				"2026-03-09T06:30:00Z", // 02:30 EDT
			},
		},
		{
			name: "New York fall back: 01:30 fires once, in EDT",
			cron: "30 1 * * *", zone: "America/New_York", from: "2026-10-30T12:00:00Z",
			want: []string{
				"2026-10-31T05:30:00Z", // 01:30 EDT
				"2026-11-01T05:30:00Z", // 01:30 EDT, the first (not 06:30Z, 01:30 EST)
				"2026-11-02T06:30:00Z", // 01:30 EST
			},
		},
		{
			name: "from inside the repeated hour, the repeated time is not fired again",
			cron: "30 2 * * *", zone: "Europe/Paris", from: "2026-10-25T01:10:00Z", // 02:10 CET, second pass
			want: []string{
				"2026-10-26T01:30:00Z", // 02:30 CET the next day
			},
		},
		{
			name: "every 15 minutes in the missing hour: once, at the jump",
			cron: "*/15 2 * * *", zone: "Europe/Paris", from: "2026-03-29T00:00:00Z", // 01:00 CET
			want: []string{
				"2026-03-29T01:00:00Z", // 03:00 CEST, for 02:00, 02:15, 02:30 and 02:45
				"2026-03-30T00:00:00Z", // 02:00 CEST
			},
		},
		{
			name: "every 15 minutes in the repeated hour: the first pass only",
			cron: "*/15 2 * * *", zone: "Europe/Paris", from: "2026-10-24T23:50:00Z",
			want: []string{
				"2026-10-25T00:00:00Z", // 02:00 CEST
				"2026-10-25T00:15:00Z", // 02:15 CEST
				"2026-10-25T00:30:00Z", // 02:30 CEST
				"2026-10-25T00:45:00Z", // 02:45 CEST; then 02:00-02:45 CET are not fired again
				"2026-10-26T01:00:00Z", // 02:00 CET the next day
			},
		},
		{
			name: "Santiago: @daily fires at 01:00 when midnight does not exist",
			cron: "@daily", zone: "America/Santiago", from: "2026-09-04T12:00:00Z",
			want: []string{
				"2026-09-05T04:00:00Z", // 00:00 -04
				"2026-09-06T04:00:00Z", // 01:00 -03: midnight does not exist
				"2026-09-07T03:00:00Z", // 00:00 -03
			},
		},
		{
			name: "Lord Howe: half-hour jump forward",
			cron: "0 2 * * *", zone: "Australia/Lord_Howe", from: "2026-10-02T00:00:00Z",
			want: []string{
				"2026-10-02T15:30:00Z", // 02:00 +10:30
				"2026-10-03T15:30:00Z", // 02:30 +11: 02:00-02:29 does not exist
				"2026-10-04T15:00:00Z", // 02:00 +11
			},
		},
		{
			name: "Lord Howe: half-hour fall back",
			cron: "45 1 * * *", zone: "Australia/Lord_Howe", from: "2026-04-03T00:00:00Z",
			want: []string{
				"2026-04-03T14:45:00Z", // 01:45 +11
				"2026-04-04T14:45:00Z", // 01:45 +11, the first of two
				"2026-04-05T15:15:00Z", // 01:45 +10:30
			},
		},
		{
			name: "Paris hourly follows elapsed time: no 02:30 in spring",
			cron: "30 * * * *", zone: "Europe/Paris", from: "2026-03-28T23:00:00Z",
			want: []string{
				"2026-03-28T23:30:00Z", // 00:30 CET
				"2026-03-29T00:30:00Z", // 01:30 CET
				"2026-03-29T01:30:00Z", // 03:30 CEST, an hour later
				"2026-03-29T02:30:00Z", // 04:30 CEST
			},
		},
		{
			name: "Paris hourly follows elapsed time: both 02:30s in autumn, an hour apart",
			cron: "30 * * * *", zone: "Europe/Paris", from: "2026-10-24T23:00:00Z",
			want: []string{
				"2026-10-24T23:30:00Z", // 01:30 CEST
				"2026-10-25T00:30:00Z", // 02:30 CEST
				"2026-10-25T01:30:00Z", // 02:30 CET
				"2026-10-25T02:30:00Z", // 03:30 CET
			},
		},
		{
			name: "New York every 2 seconds keeps its rhythm through spring forward",
			cron: "*/2 * * * * *", zone: "America/New_York", from: "2026-03-08T06:59:57Z",
			want: []string{
				"2026-03-08T06:59:58Z", // 01:59:58 EST
				"2026-03-08T07:00:00Z", // 03:00:00 EDT
				"2026-03-08T07:00:02Z", // 03:00:02 EDT
			},
		},
		{
			name: "New York every 2 seconds keeps its rhythm through fall back",
			cron: "*/2 * * * * *", zone: "America/New_York", from: "2026-11-01T05:59:57Z",
			want: []string{
				"2026-11-01T05:59:58Z", // 01:59:58 EDT
				"2026-11-01T06:00:00Z", // 01:00:00 EST
				"2026-11-01T06:00:02Z", // 01:00:02 EST
			},
		},
		{
			name: "six fields, seconds first, in UTC",
			cron: "15 30 9 * * MON-FRI", zone: "UTC", from: "2026-11-20T09:30:15Z", // a Friday, exactly at the time
			want: []string{
				"2026-11-23T09:30:15Z", // Monday
				"2026-11-24T09:30:15Z",
			},
		},
		{
			name: "@hourly in Paris across the autumn transition",
			cron: "@hourly", zone: "Europe/Paris", from: "2026-10-24T23:30:00Z",
			want: []string{
				"2026-10-25T00:00:00Z", // 02:00 CEST
				"2026-10-25T01:00:00Z", // 02:00 CET
				"2026-10-25T02:00:00Z", // 03:00 CET
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := schedule.Parse(tc.cron, tc.zone, time.Time{})
			require.NoError(t, err)
			got := s.NextN(utc(t, tc.from), len(tc.want))
			gotUTC := make([]string, len(got))
			for i, at := range got {
				gotUTC[i] = at.UTC().Format(time.RFC3339)
				require.Equal(t, tc.zone, at.Location().String(), "fire times are in the schedule's zone")
			}
			require.Equal(t, tc.want, gotUTC)
		})
	}
}

// TestOncePerDayThroughTheYear counts a daily time's fire times over all of
// 2026: exactly one a local day, DST days included, in both zones.
func TestOncePerDayThroughTheYear(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cron, zone string }{
		{"30 2 * * *", "Europe/Paris"},
		{"30 2 * * *", "America/New_York"},
		{"30 1 * * *", "America/New_York"},
		{"0 0 * * *", "America/Santiago"},
	} {
		t.Run(tc.zone+" "+tc.cron, func(t *testing.T) {
			t.Parallel()
			s, err := schedule.Parse(tc.cron, tc.zone, time.Time{})
			require.NoError(t, err)
			loc := s.Location()
			days := map[string]int{}
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, loc).Add(-time.Nanosecond)
			end := time.Date(2027, 1, 1, 0, 0, 0, 0, loc)
			prev := time.Time{}
			for {
				at = s.Next(at)
				if !at.Before(end) {
					break
				}
				require.True(t, at.After(prev))
				prev = at
				days[at.In(loc).Format(time.DateOnly)]++
			}
			require.Len(t, days, 365)
			for day, n := range days {
				require.Equal(t, 1, n, "fire times on %s", day)
			}
		})
	}
}

// TestHourlyThroughTheYear: a schedule with hour `*` follows elapsed time,
// one fire time per real hour all year (8760), DST days included.
func TestHourlyThroughTheYear(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{"Europe/Paris", "America/New_York"} {
		s, err := schedule.Parse("30 * * * *", zone, time.Time{})
		require.NoError(t, err)
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		at, n := from, 0
		for {
			next := s.Next(at)
			if !next.Before(from.AddDate(1, 0, 0)) {
				break
			}
			if n > 0 {
				require.Equal(t, time.Hour, next.Sub(at), "%s: after %s", zone, at)
			}
			at, n = next, n+1
		}
		require.Equal(t, 8760, n, zone)
	}
}

func TestEvery(t *testing.T) {
	t.Parallel()
	// The anchor is truncated to the second: fire times are whole seconds.
	anchor := utc(t, "2026-03-29T00:59:58Z").Add(700 * time.Millisecond)
	s, err := schedule.Parse("@every 90s", "Europe/Paris", anchor)
	require.NoError(t, err)
	got := s.NextN(anchor, 3)
	require.Equal(t, []time.Time{
		utc(t, "2026-03-29T01:01:28Z"), // elapsed time, across the spring-forward jump
		utc(t, "2026-03-29T01:02:58Z"),
		utc(t, "2026-03-29T01:04:28Z"),
	}, utcAll(got))
	// Before the anchor, the first fire time is one interval after it.
	require.Equal(t, utc(t, "2026-03-29T01:01:28Z"), s.Next(anchor.Add(-time.Hour)).UTC())
	// Far after it, still on the same grid.
	require.Equal(t, utc(t, "2026-04-29T00:59:58Z").Add(90*time.Second), s.Next(utc(t, "2026-04-29T00:59:58Z")).UTC())
}

func utcAll(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, at := range ts {
		out[i] = at.UTC()
	}
	return out
}

func TestLast(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		cron     string
		zone     string
		anchor   string
		from, to string
		want     string // "" for none
	}{
		{name: "a month of a daily time", cron: "0 9 * * *", zone: "Europe/Paris",
			from: "2026-03-01T00:00:00Z", to: "2026-03-29T12:00:00Z", want: "2026-03-29T07:00:00Z"}, // 09:00 CEST
		{name: "to is a fire time", cron: "0 9 * * *", zone: "Europe/Paris",
			from: "2026-03-01T00:00:00Z", to: "2026-03-29T07:00:00Z", want: "2026-03-29T07:00:00Z"},
		{name: "from is the only fire time", cron: "0 9 * * *", zone: "UTC",
			from: "2026-03-29T09:00:00Z", to: "2026-03-29T12:00:00Z", want: "2026-03-29T09:00:00Z"},
		{name: "none in range", cron: "0 9 * * *", zone: "UTC",
			from: "2026-03-29T09:00:01Z", to: "2026-03-30T08:59:59Z", want: ""},
		{name: "every 2 seconds over 30 days", cron: "*/2 * * * * *", zone: "America/New_York",
			from: "2026-02-20T00:00:00Z", to: "2026-03-22T10:11:13.5Z", want: "2026-03-22T10:11:12Z"},
		{name: "the missing time resolves to the jump", cron: "30 2 * * *", zone: "Europe/Paris",
			from: "2026-03-20T00:00:00Z", to: "2026-03-29T01:30:00Z", want: "2026-03-29T01:00:00Z"},
		{name: "@every", cron: "@every 7s", zone: "UTC", anchor: "2026-01-01T00:00:00Z",
			from: "2026-01-01T00:00:00Z", to: "2026-01-02T00:00:00Z", want: "2026-01-01T23:59:54Z"}, // 86400 s = 7·12342 + 6
		{name: "to before from", cron: "* * * * *", zone: "UTC",
			from: "2026-01-02T00:00:00Z", to: "2026-01-01T00:00:00Z", want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var anchor time.Time
			if tc.anchor != "" {
				anchor = utc(t, tc.anchor)
			}
			s, err := schedule.Parse(tc.cron, tc.zone, anchor)
			require.NoError(t, err)
			from, err := time.Parse(time.RFC3339Nano, tc.from)
			require.NoError(t, err)
			to, err := time.Parse(time.RFC3339Nano, tc.to)
			require.NoError(t, err)
			got := s.Last(from, to)
			if tc.want == "" {
				require.True(t, got.IsZero(), "got %s", got)
				return
			}
			require.Equal(t, utc(t, tc.want), got.UTC())
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, cron, zone string
		field            string
		message          string // a part of the message
	}{
		{name: "empty", cron: "", zone: "UTC", field: "cron", message: "required"},
		{name: "three fields", cron: "1 2 3", zone: "UTC", field: "cron", message: "expected 5 to 6 fields"},
		{name: "seven fields", cron: "0 0 0 1 1 * 2026", zone: "UTC", field: "cron", message: "expected 5 to 6 fields"},
		{name: "minute out of range", cron: "61 * * * *", zone: "UTC", field: "cron", message: "above maximum (59)"},
		{name: "unsupported L", cron: "0 0 L * *", zone: "UTC", field: "cron", message: "failed to parse int from L"},
		{name: "unknown descriptor", cron: "@fortnightly", zone: "UTC", field: "cron", message: "unrecognized descriptor"},
		{name: "30 February", cron: "0 0 30 2 *", zone: "UTC", field: "cron", message: "never matches"},
		{name: "every below a second", cron: "@every 500ms", zone: "UTC", field: "cron", message: "at least 1s"},
		{name: "every negative", cron: "@every -5s", zone: "UTC", field: "cron", message: "at least 1s"},
		{name: "every without duration", cron: "@every", zone: "UTC", field: "cron", message: "needs a duration"},
		{name: "every not a duration", cron: "@every day", zone: "UTC", field: "cron", message: "needs a duration"},
		{name: "zone in the expression", cron: "CRON_TZ=Europe/Paris 0 9 * * *", zone: "UTC", field: "cron", message: "timezone field"},
		{name: "unknown zone", cron: "0 9 * * *", zone: "Europe/Atlantis", field: "timezone", message: "not a known IANA time zone"},
		{name: "Local", cron: "0 9 * * *", zone: "Local", field: "timezone", message: "IANA"},
		{name: "empty zone", cron: "0 9 * * *", zone: "", field: "timezone", message: "IANA"},
		{name: "path in zone", cron: "0 9 * * *", zone: "../../etc/passwd", field: "timezone", message: "not a known"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := schedule.Parse(tc.cron, tc.zone, time.Time{})
			require.Error(t, err)
			e, ok := schedule.IsError(err)
			require.True(t, ok, "%T %v", err, err)
			require.Equal(t, tc.field, e.Field)
			require.Contains(t, e.Message, tc.message)
		})
	}
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{
		"* * * * *", "0 9 * * 1-5", "*/5 * * * *", "0 0 1 1 *", "0 0 29 2 *", "0 12 * JAN,JUL SUN",
		"*/2 * * * * *", "0 30 9 * * *", "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight",
		"@hourly", "@every 1s", "@every 1h30m", "  0 9 * * *  ",
	} {
		_, err := schedule.Parse(expr, "Europe/Paris", time.Now())
		require.NoError(t, err, expr)
	}
}
