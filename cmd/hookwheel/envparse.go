package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/hookwheel/hookwheel/dispatcher"
)

// The readers of environment variables' values that loadEnv shares.

// keepEnv reads the retention name of kept rows: unset is 0 (the
// dispatcher's default), 0 is dispatcher.KeepForever, anything else a
// duration of at least a second such as example.
func keepEnv(name, v, example, kept string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil || d < 0 || (d > 0 && d < time.Second):
		return 0, fmt.Errorf("%s: want a duration of at least 1s such as %s, or 0 to keep %s, got %q", name, example, kept, v)
	case d == 0:
		return dispatcher.KeepForever, nil
	}
	return d, nil
}

func or(v, fallback string) string {
	if v == "" {
		return fallback
	}
	return v
}

func intEnv(getenv func(string) string, name string) (int, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: want a positive integer, got %q", name, v)
	}
	return n, nil
}

// durationEnv reads a positive Go duration, fallback when unset (0: the
// default of the field it sets).
func durationEnv(getenv func(string) string, name string, fallback time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return fallback, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: want a positive duration such as 30s or 5m, got %q", name, v)
	}
	return d, nil
}
