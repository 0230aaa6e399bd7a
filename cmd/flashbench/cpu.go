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
	// DepParents: the run's postmaster and Redis server; when set, only
	// they and their children are PostgreSQL and Redis (not every postgres
	// and redis-server process on the machine).
	DepParents []int `json:"depParents,omitempty"`
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
		comm, fields, ok := procStat(pid)
		if !ok {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		ppid, _ := strconv.Atoi(fields[1])
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
		case len(g.DepParents) > 0:
			if slices.Contains(g.DepParents, pid) || slices.Contains(g.DepParents, ppid) {
				grp = cpuDeps
			}
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

// winnerCPU is what one winner cost the machine: the CPU of the server under
// load and of its dependencies (PostgreSQL, Redis, the broker process) from
// the start of the load until its winners are written (the kafka path's
// consumer catches up after the load), divided by the winners. Every
// postgres and redis-server process counts, so another run's work on the
// machine inflates it: read it with the row's "other" cores.
type winnerCPU struct {
	Micros       float64 `json:"machineMicrosPerWinner"`
	ServerMicros float64 `json:"serverMicrosPerWinner"`
	DepsMicros   float64 `json:"postgresRedisBrokerMicrosPerWinner"`
	Seconds      float64 `json:"seconds"`
	OtherCores   float64 `json:"otherProcessesCores"`
	WinnersCount int64   `json:"winners"`
}

func perWinner(before, after cpuSample, winners int64) *winnerCPU {
	secs := after.at.Sub(before.at).Seconds()
	if secs <= 0 || winners <= 0 {
		return nil
	}
	use := after.since(before)
	us := func(cores float64) float64 { return cores * secs / float64(winners) * 1e6 }
	return &winnerCPU{Micros: us(use.Server + use.Deps), ServerMicros: us(use.Server), DepsMicros: us(use.Deps), Seconds: secs, OtherCores: use.Other, WinnersCount: winners}
}

// parentPID is a process's parent from /proc, 0 when it cannot be read.
func parentPID(pid int) int {
	_, fields, ok := procStat(pid)
	if !ok {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// procStat reads /proc/<pid>/stat: the command name and the fields after
// it, from the state on (fields[1] the parent, fields[11] and [12] utime
// and stime); ok is false when it cannot be read or is cut short.
func procStat(pid int) (comm string, fields []string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", nil, false
	}
	// pid (comm) state ppid ... utime(14) stime(15): comm may hold spaces.
	open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
	if open < 0 || end < open {
		return "", nil, false
	}
	fields = strings.Fields(string(b[end+1:]))
	if len(fields) < 13 {
		return "", nil, false
	}
	return string(b[open+1 : end]), fields, true
}
