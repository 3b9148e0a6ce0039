package main

import (
	"fmt"
	"strconv"
	"time"
)

// The readers of single environment variables that loadEnv and the
// settings of each feature share.

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
