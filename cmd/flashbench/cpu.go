package main

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The machine may be shared (other people's tests, a browser): how much CPU
// the rest of the machine used during a load tells which rows it disturbed.
// The load process reads /proc before and after its load and puts every
// process in a group: the server under load, the load process itself, the
// service's dependencies (postgres, redis-server, the Kafka broker process), the rest of the harness
// (flashbench, the idle servers) and everything else.

type cpuGroup int

const (
	cpuServer cpuGroup = iota
	cpuLoad
	cpuDeps
	cpuHarness
	cpuOther
)

// cpuGroups names the processes of the run by pid.
type cpuGroups struct {
	Server  int   `json:"server"`  // the process under load; 0: none (EVALSHA, or -url)
	Harness []int `json:"harness"` // flashbench itself and the servers not under load
	Deps    []int `json:"deps"`    // the broker process, with PostgreSQL and Redis
}

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
	Server  float64 `json:"server"`
	Load    float64 `json:"load"`
	Deps    float64 `json:"postgresRedis"`
	Harness float64 `json:"harness"`
	Other   float64 `json:"otherProcesses"`
}

const clockTicks = 100 // USER_HZ on Linux

func sampleCPU(g cpuGroups) cpuSample {
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
		grp := cpuOther
		switch {
		case pid == self:
			grp = cpuLoad
		case g.Server != 0 && pid == g.Server:
			grp = cpuServer
		case slices.Contains(g.Harness, pid):
			grp = cpuHarness
		case slices.Contains(g.Deps, pid):
			grp = cpuDeps
		case comm == "postgres" || strings.HasPrefix(comm, "redis-server") || strings.HasPrefix(comm, "postgres:"):
			grp = cpuDeps
		}
		s.ticks[pid] = procTicks{group: grp, ticks: utime + stime}
	}
	return s
}

// since is the CPU used between two samples; a process that started in
// between counts from zero, one that ended is not seen.
func (s cpuSample) since(before cpuSample) cpuUse {
	var by [5]int64
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
	return cpuUse{Server: cores(by[cpuServer]), Load: cores(by[cpuLoad]), Deps: cores(by[cpuDeps]), Harness: cores(by[cpuHarness]), Other: cores(by[cpuOther])}
}
