package main

import "time"

// expiryFlags are --expires-at and --expires-in, of tasks create and topics
// publish: when the webhook stops being worth sending, as --at and --in
// say when to send it.
type expiryFlags struct {
	at string
	in time.Duration
}

func (c *command) expiryFlags() *expiryFlags {
	e := &expiryFlags{}
	c.fs.StringVar(&e.at, "expires-at", "",
		"no attempt starts at or after this time, RFC 3339; the task then ends expired (its failure callback told)")
	c.fs.DurationVar(&e.in, "expires-in", 0, "--expires-at as a time from now (10m, 1h)")
	return e
}

// read returns the expiry the flags give: ExpiresAt, or ExpiresIn after
// now; both zero for none.
func (e *expiryFlags) read(c *command) (expiresAt time.Time, expiresIn time.Duration, err error) {
	if e.at != "" && e.in != 0 {
		return time.Time{}, 0, c.usageError("--expires-at and --expires-in are exclusive")
	}
	if e.in < 0 || (e.in == 0 && flagSet(c.fs, "expires-in")) {
		return time.Time{}, 0, c.usageError("--expires-in must be positive")
	}
	if e.at != "" {
		if expiresAt, err = time.Parse(time.RFC3339, e.at); err != nil {
			return time.Time{}, 0, c.usageError("--expires-at must be an RFC 3339 time such as 2030-01-02T15:04:05Z")
		}
	}
	return expiresAt, e.in, nil
}
