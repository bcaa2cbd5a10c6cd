package realtime

import "testing"

func TestSocketsAcquire(t *testing.T) {
	var s Sockets
	r1, ok1 := s.Acquire("k", 2)
	r2, ok2 := s.Acquire("k", 2)
	_, ok3 := s.Acquire("k", 2)
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("acquire: %v %v %v, want the third refused", ok1, ok2, ok3)
	}
	if _, ok := s.Acquire("other", 2); !ok {
		t.Error("another key was refused")
	}
	r1()
	r1() // a second release gives nothing back
	if s.Open("k") != 1 {
		t.Errorf("open %d after one release, want 1", s.Open("k"))
	}
	r2()
	if s.Open("k") != 0 {
		t.Errorf("open %d", s.Open("k"))
	}
	for i := 0; i < 100; i++ {
		if _, ok := s.Acquire("u", -1); !ok {
			t.Fatal("unbounded key refused")
		}
	}
}

func TestPoolSharedAcrossConfigs(t *testing.T) {
	a, releaseA := Pool()
	b, releaseB := Pool()
	defer releaseB()
	if a != b {
		t.Error("two configurations got different socket counts")
	}
	releaseA()
	c, releaseC := Pool()
	defer releaseC()
	if c != b {
		t.Error("the counts were dropped while a configuration still used them")
	}
}

func TestLimitsFill(t *testing.T) {
	l := Limits{MaxMessage: 10}.Fill()
	if l.MaxMessage != 10 || l.MaxSession != DefaultMaxSession || l.Idle != DefaultIdle || l.WriteTimeout != DefaultWriteTimeout || l.MaxPerKey != DefaultMaxPerKey {
		t.Errorf("%+v", l)
	}
	if (Limits{MaxPerKey: -1}).Fill().MaxPerKey != -1 {
		t.Error("unbounded sockets per key lost")
	}
}
