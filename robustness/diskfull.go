package robustness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/writ-dev/writ/internal/proccluster"
)

// DiskFull fills the disk of one node: the node (the leader or a follower)
// is stopped, its data directory moved onto a tmpfs mounted in its place
// with 16–48 KiB free, and started again under traffic, the nemesis
// reporting facts to it until it fills. It must stop
// with writd's fatal exit (1) or go on refusing what it cannot write,
// acknowledging nothing it did not write; the tmpfs is then grown (space
// returns), the node restarted on it and it must become ready; last, its
// data is moved back to the disk and the tmpfs unmounted. Root only.
const DiskFull = "disk-full"

// diskFullWithin bounds how long the nemesis waits for the node to fill
// its disk and stop (on a loaded machine the facts it is sent can take
// most of a minute to fill even 48 KiB).
const diskFullWithin = 60 * time.Second

// DiskFullFault is what a disk-full fault did.
type DiskFullFault struct {
	Node string `json:"node"`
	// Free is the space the tmpfs had left when the node started on it.
	Free int64 `json:"free_bytes"`
	// Full: the tmpfs had no space left when the wait ended.
	Full bool `json:"full"`
	// Stopped: the node exited by itself, with ExitCode and Said.
	Stopped  bool   `json:"stopped,omitempty"`
	ExitCode int    `json:"exit_code,omitempty"`
	Said     string `json:"said,omitempty"`
	// Recovered: once space returned, the restarted node became ready
	// within 60 s (Recovery says why not).
	Recovered bool   `json:"recovered"`
	Recovery  string `json:"recovery,omitempty"`
}

// diskFullAvailable reports whether the disk-full fault can run (root, to
// mount a tmpfs).
func diskFullAvailable() error {
	if os.Geteuid() != 0 {
		return errors.New("mounting a tmpfs needs root")
	}
	return nil
}

// diskFull runs DiskFull on victim; the error is for a fault that could
// not be injected (the disk never filled, a mount failed).
func (ne *nemesis) diskFull(ctx context.Context, victim *Node) (time.Duration, *DiskFullFault, error) {
	rec := &DiskFullFault{Node: victim.Name}
	if err := ne.cl.pc.WaitReady(ctx, victim.Node, 20*time.Second); err != nil {
		return 0, rec, err
	}
	t0 := time.Now()
	if _, err := victim.Stop(10 * time.Second); err != nil {
		return 0, rec, fmt.Errorf("robustness: %w", err)
	}
	mnt := &tmpfsDir{dir: victim.Dir}
	defer func() { _ = mnt.restore() }()
	free := int64(16<<10 + ne.rng.IntN(5)*8<<10)
	var err error
	if rec.Free, err = mnt.mount(free); err != nil {
		return time.Since(t0), rec, err
	}
	victim.expectFatal(true)
	if err := ne.cl.Start(victim); err != nil {
		victim.expectFatal(false)
		return time.Since(t0), rec, err
	}
	// Facts reported to the node fill it whatever the rest of the
	// traffic and the snapshot interval are.
	lctx, stopLoad := context.WithCancel(ctx)
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		if ne.load != nil {
			ne.load(lctx, victim)
		}
	}()
	// Until the node stops, or its disk is full and it has had 5 s more
	// to stop (it may go on refusing instead), at most diskFullWithin.
	var fullSince time.Time
	_ = poll(ctx, diskFullWithin, func() (bool, string) {
		if !victim.Running() {
			return true, ""
		}
		if fullSince.IsZero() && mnt.free() < 8<<10 {
			fullSince = time.Now()
		}
		return !fullSince.IsZero() && time.Since(fullSince) > 5*time.Second, fmt.Sprintf("%d bytes free", mnt.free())
	})
	if !victim.Running() {
		rec.Stopped, rec.ExitCode = true, victim.ExitCode()
	}
	stopLoad()
	<-loaded
	rec.Full = !fullSince.IsZero() || mnt.free() < 8<<10
	rec.Said = fatalLine(victim.Log)
	if !rec.Stopped {
		_, _ = victim.Stop(10 * time.Second)
	}
	victim.expectFatal(false)
	// Space returns: the node must start on the same directory and serve.
	if err := mnt.grow(); err != nil {
		return time.Since(t0), rec, err
	}
	if err := ne.cl.Start(victim); err != nil {
		return time.Since(t0), rec, err
	}
	if err := ne.cl.pc.WaitReady(ctx, victim.Node, 60*time.Second); err != nil {
		rec.Recovery = err.Error()
	} else {
		rec.Recovered = true
	}
	if _, err := victim.Stop(10 * time.Second); err != nil && !errors.Is(err, proccluster.ErrNotRunning) {
		return time.Since(t0), rec, fmt.Errorf("robustness: %w", err)
	}
	if err := mnt.restore(); err != nil {
		return time.Since(t0), rec, err
	}
	err = ne.cl.Start(victim)
	if err == nil && !rec.Stopped && !rec.Full {
		err = fmt.Errorf("robustness: %s neither filled its %d KiB nor stopped within %s", victim.Name, rec.Free>>10, diskFullWithin)
	}
	return time.Since(t0), rec, err
}

// tmpfsDir moves a directory onto a tmpfs mounted in its place and back.
type tmpfsDir struct {
	dir            string
	moved, mounted bool
}

// mount moves dir aside, mounts a tmpfs at dir, copies the data onto it
// and shrinks the tmpfs to what the data uses plus free; it returns the
// space left.
func (m *tmpfsDir) mount(free int64) (int64, error) {
	if err := os.Rename(m.dir, m.dir+".disk"); err != nil {
		return 0, fmt.Errorf("robustness: disk-full: %w", err)
	}
	m.moved = true
	if err := os.Mkdir(m.dir, 0o700); err != nil {
		return 0, fmt.Errorf("robustness: disk-full: %w", err)
	}
	if err := run("mount", "-t", "tmpfs", "-o", "size=1g,mode=0700", "tmpfs", m.dir); err != nil {
		return 0, err
	}
	m.mounted = true
	// Every block allocated: the WAL's preallocated segment stays
	// allocated, so the node starts and fills what it writes next.
	if err := run("cp", "-a", "--sparse=never", m.dir+".disk/.", m.dir+"/"); err != nil {
		return 0, err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(m.dir, &st); err != nil {
		return 0, fmt.Errorf("robustness: disk-full: %w", err)
	}
	used := int64(st.Blocks-st.Bfree) * st.Bsize
	size := (used + free + 4095) &^ 4095
	if err := run("mount", "-o", fmt.Sprintf("remount,size=%d", size), m.dir); err != nil {
		return 0, err
	}
	return m.free(), nil
}

// free is the space left on the tmpfs.
func (m *tmpfsDir) free() int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(m.dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * st.Bsize
}

// grow gives the tmpfs room again.
func (m *tmpfsDir) grow() error {
	return run("mount", "-o", "remount,size=1g", m.dir)
}

// restore copies the data back onto the disk, unmounts the tmpfs and puts
// the directory back in its place; it does nothing once done. Before the
// tmpfs was mounted it only moves the directory back.
func (m *tmpfsDir) restore() error {
	if !m.moved {
		return nil
	}
	if !m.mounted {
		_ = os.Remove(m.dir)
		if err := os.Rename(m.dir+".disk", m.dir); err != nil {
			return fmt.Errorf("robustness: disk-full: %w", err)
		}
		m.moved = false
		return nil
	}
	if err := os.RemoveAll(m.dir + ".disk"); err != nil {
		return fmt.Errorf("robustness: disk-full: %w", err)
	}
	if err := os.Mkdir(m.dir+".disk", 0o700); err != nil {
		return fmt.Errorf("robustness: disk-full: %w", err)
	}
	if err := run("cp", "-a", m.dir+"/.", m.dir+".disk/"); err != nil {
		return err
	}
	if err := run("umount", m.dir); err != nil {
		return err
	}
	m.mounted = false
	if err := os.Remove(m.dir); err != nil {
		return fmt.Errorf("robustness: disk-full: %w", err)
	}
	if err := os.Rename(m.dir+".disk", m.dir); err != nil {
		return fmt.Errorf("robustness: disk-full: %w", err)
	}
	m.moved = false
	return nil
}

// checkDiskFull: for every disk-full fault, the node that filled its disk
// exited, if it did, with writd's fatal storage exit (not a crash, not the
// fatal apply stop, which says never to restart), or refused to start
// saying the disk is full (writd's start failure, exit 2), and became
// ready once space returned. That it acknowledged nothing it did not write is checks
// (a), (b) and (c).
func checkDiskFull(faults []Fault) CheckResult {
	r := CheckResult{Name: "disk-full-recovers", Pass: true}
	for _, f := range faults {
		rec := f.DiskFull
		if rec == nil || f.Error != "" {
			continue
		}
		r.Cases++
		startRefused := rec.ExitCode == writdExitStart && strings.Contains(rec.Said, "no space left on device")
		if rec.Stopped && rec.ExitCode != writdExitFatal && !startRefused {
			r.fail("%s exited with code %d when its disk filled, not writd's fatal storage exit %d (%s)", rec.Node, rec.ExitCode, writdExitFatal, rec.Said)
		}
		if !rec.Recovered {
			r.fail("%s did not become ready once space returned: %s", rec.Node, rec.Recovery)
		}
	}
	return r
}

// run runs a command, its output in the error.
func run(name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("robustness: %s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
