package main

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// The machine may be shared (other people's tests, a browser): how much CPU
// the rest of the machine used during a load tells which rows it disturbed.
// Processes are read from /proc and put in three groups: this process (the
// server and the load), the service's dependencies (postgres, redis-server)
// and everything else.

type cpuGroup int

const (
	cpuSelf cpuGroup = iota
	cpuDeps
	cpuOther
)

type cpuSample struct {
	at    time.Time
	ticks map[int]procTicks
}

type procTicks struct {
	group cpuGroup
	ticks int64
}

// cpuUse is a load's CPU by group, in cores (1.0 = one core busy all along).
type cpuUse struct {
	Self  float64 `json:"flashbench"`
	Deps  float64 `json:"postgresRedis"`
	Other float64 `json:"otherProcesses"`
}

const clockTicks = 100 // USER_HZ on Linux

func sampleCPU() cpuSample {
	s := cpuSample{at: time.Now(), ticks: map[int]procTicks{}}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return s
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15): comm may hold spaces.
		open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		if open < 0 || end < open {
			continue
		}
		comm := string(b[open+1 : end])
		fields := strings.Fields(string(b[end+1:]))
		if len(fields) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		g := cpuOther
		switch {
		case pid == self:
			g = cpuSelf
		case comm == "postgres" || strings.HasPrefix(comm, "redis-server") || strings.HasPrefix(comm, "postgres:"):
			g = cpuDeps
		}
		s.ticks[pid] = procTicks{group: g, ticks: utime + stime}
	}
	return s
}

// since is the CPU used between two samples; a process that started in
// between counts from zero, one that ended is not seen.
func (s cpuSample) since(before cpuSample) cpuUse {
	var by [3]int64
	for pid, p := range s.ticks {
		d := p.ticks - before.ticks[pid].ticks
		if d > 0 {
			by[p.group] += d
		}
	}
	secs := s.at.Sub(before.at).Seconds()
	if secs <= 0 {
		return cpuUse{}
	}
	cores := func(t int64) float64 { return float64(t) / clockTicks / secs }
	return cpuUse{Self: cores(by[cpuSelf]), Deps: cores(by[cpuDeps]), Other: cores(by[cpuOther])}
}
