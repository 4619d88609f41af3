package raftstore

import (
	"context"
	"fmt"
	"log/slog"
)

// raftLogger adapts slog to the logger etcd raft expects.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any) { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(f string, v ...any) {
	if r.l.Enabled(context.Background(), slog.LevelDebug) {
		r.l.Debug(fmt.Sprintf(f, v...))
	}
}
func (r raftLogger) Info(v ...any) { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(f string, v ...any) {
	if r.l.Enabled(context.Background(), slog.LevelDebug) {
		r.l.Debug(fmt.Sprintf(f, v...))
	}
}
func (r raftLogger) Warning(v ...any)            { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(f string, v ...any) { r.l.Warn(fmt.Sprintf(f, v...)) }
func (r raftLogger) Error(v ...any)              { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(f string, v ...any)   { r.l.Error(fmt.Sprintf(f, v...)) }
func (r raftLogger) Fatal(v ...any)              { r.Panic(v...) }
func (r raftLogger) Fatalf(f string, v ...any)   { r.Panicf(f, v...) }
func (r raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.l.Error(s)
	panic(s)
}
func (r raftLogger) Panicf(f string, v ...any) {
	s := fmt.Sprintf(f, v...)
	r.l.Error(s)
	panic(s)
}
