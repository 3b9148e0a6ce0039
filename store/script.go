package store

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, each opening with a comment that names its KEYS, ARGV and
// return value.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// script is one embedded Lua script and the one way hookwheel runs it: by its
// SHA-1 (EVALSHA), sending the source only when the server does not know it
// yet (NOSCRIPT: first use, a restart, SCRIPT FLUSH). A decision is then one
// round trip, and a batch of them one pipeline.
type script struct {
	*redis.Script
}

// loadScript reads lua/<name>.lua. The files are part of the binary, so a
// missing one is a build mistake.
func loadScript(name string) script {
	src, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("store: embedded script %s: %v", name, err))
	}
	return script{redis.NewScript(string(src))}
}

// run evaluates the script once.
func (s script) run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.Run(ctx, c, keys, args...)
}

// runEach evaluates the script n times in one pipeline, in order, the i-th
// time with the keys and arguments call(i) gives. The commands that failed
// with NOSCRIPT are sent again with the source, in a second pipeline, and
// only those: on a Redis Cluster the pipeline is split among the masters, and
// a master that knew the script has run its commands, which must not run
// twice (an admission would book a second rate slot). Each command so runs
// exactly once, but not always in the order given: the retried ones run
// after the whole first pipeline, and a master may learn the script part way
// through it (another client's EVAL loading it between two of these
// commands), so a command that got NOSCRIPT can run after a later one on the
// same key that did not. Only a pipeline that meets NOSCRIPT (first use, a
// restart, SCRIPT FLUSH) is reordered; without it the commands of one master
// run in order. The error is the first failed command's, if any; each command
// keeps its own result.
func (s script) runEach(ctx context.Context, c redis.Cmdable, n int, call func(i int) (keys []string, args []any)) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, n)
	_, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i := range n {
			keys, args := call(i)
			cmds[i] = s.EvalSha(ctx, pipe, keys, args...)
		}
		return nil
	})
	if err == nil {
		return cmds, nil
	}
	var unknown []int
	for i, cmd := range cmds {
		if cmd != nil && isNoScript(cmd.Err()) {
			unknown = append(unknown, i)
		}
	}
	if len(unknown) == 0 {
		return cmds, err
	}
	retried := make([]*redis.Cmd, len(unknown))
	_, _ = c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for j, i := range unknown {
			keys, args := call(i)
			retried[j] = s.Eval(ctx, pipe, keys, args...)
		}
		return nil
	})
	for j, i := range unknown {
		cmds[i] = retried[j]
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

// isNoScript reports whether the server did not know the script's SHA-1:
// go-redis gives the server's NOSCRIPT error as it is in a pipeline, and as
// redis.ErrNoScript elsewhere.
func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// scripts are every script the store runs.
type scripts struct {
	claimAttempt   script
	releaseAttempt script
	gcra           script
	dispatchAdmit  script
}

func loadScripts() scripts {
	return scripts{
		claimAttempt:   loadScript("claim_attempt"),
		releaseAttempt: loadScript("release_attempt"),
		gcra:           loadScript("gcra"),
		dispatchAdmit:  loadScript("dispatch_admit"),
	}
}
