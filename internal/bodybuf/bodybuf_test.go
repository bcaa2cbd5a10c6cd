package bodybuf

import (
	"bytes"
	"io"
	"sync"
	"testing"
)

func TestGetSizes(t *testing.T) {
	for _, c := range []struct {
		n       int64
		pooled  bool
		wantCap int
	}{
		{0, false, 0},
		{MinPooled - 1, false, 0},
		{MinPooled, true, 64 << 10},
		{64 << 10, true, 64 << 10},
		{64<<10 + 1, true, 128 << 10},
		{200_000, true, 256 << 10},
		{MaxPooled, true, MaxPooled},
		{MaxPooled + 1, false, 0},
	} {
		b := Get(c.n)
		if (b != nil) != c.pooled {
			t.Errorf("Get(%d) pooled = %v, want %v", c.n, b != nil, c.pooled)
			continue
		}
		if b == nil {
			continue
		}
		if got := b.Bytes(); int64(len(got)) != c.n || cap(got) != len(got) || cap(b.b) != c.wantCap {
			t.Errorf("Get(%d): len %d cap %d, buffer cap %d; want len=cap=%d, buffer %d", c.n, len(got), cap(got), cap(b.b), c.n, c.wantCap)
		}
		b.Release()
	}
}

func TestOwns(t *testing.T) {
	b := Get(100_000)
	defer b.Release()
	body := b.Bytes()
	for _, c := range []struct {
		name string
		p    []byte
		want bool
	}{
		{"the body", body, true},
		{"a part", body[10:20], true},
		{"empty", body[:0], false},
		{"another slice", make([]byte, 10), false},
		{"a copy", bytes.Clone(body), false},
	} {
		if got := b.Owns(c.p); got != c.want {
			t.Errorf("%s: Owns = %v, want %v", c.name, got, c.want)
		}
	}
}

// watchPut records the buffers given back to a pool while a test runs.
func watchPut(t *testing.T) *[]*Buf {
	var mu sync.Mutex
	var got []*Buf
	prev := put
	put = func(b *Buf) {
		mu.Lock()
		got = append(got, b)
		mu.Unlock()
	}
	t.Cleanup(func() { put = prev })
	return &got
}

// TestReaderHoldsBuffer: the owner's release does not give the buffer
// back while a transport still holds a reader of it; the reader's close
// does, once.
func TestReaderHoldsBuffer(t *testing.T) {
	puts := watchPut(t)
	b := Get(100_000)
	body := b.Bytes()
	for i := range body {
		body[i] = byte(i)
	}
	want := bytes.Clone(body)
	rd := b.NewReader(body)
	b.Release()
	if len(*puts) != 0 {
		t.Fatal("the buffer went back to the pool while a reader was open")
	}
	got, err := io.ReadAll(rd)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes (err %v), want the body", len(got), err)
	}
	rd.Close()
	rd.Close()
	if len(*puts) != 1 || (*puts)[0] != b {
		t.Fatalf("pooled %d buffers after the last close, want the body's once", len(*puts))
	}
	if _, err := rd.Read(make([]byte, 1)); err == nil {
		t.Error("a closed reader read")
	}
}

func TestKeepLeavesBufferToGC(t *testing.T) {
	puts := watchPut(t)
	b := Get(100_000)
	b.Keep()
	b.Release()
	if len(*puts) != 0 {
		t.Error("a kept buffer went back to the pool")
	}
}

func TestReaderAfterReleaseFails(t *testing.T) {
	watchPut(t)
	b := Get(100_000)
	body := b.Bytes()
	b.Release()
	if _, err := b.NewReader(body).Read(make([]byte, 10)); err != ErrReleased {
		t.Errorf("reading a released buffer: err %v, want ErrReleased", err)
	}
}

// TestCloseWhileReading: a transport closing the body from another
// goroutine while reading it (run with -race) never reads after its
// reference was dropped.
func TestCloseWhileReading(t *testing.T) {
	for range 50 {
		b := Get(1 << 20)
		rd := b.NewReader(b.Bytes())
		b.Release()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for {
				if _, err := rd.Read(buf); err != nil {
					return
				}
			}
		}()
		rd.Close()
		wg.Wait()
	}
}

func TestReleasedTooOftenPanics(t *testing.T) {
	watchPut(t)
	b := Get(100_000)
	b.Release()
	defer func() {
		if recover() == nil {
			t.Error("a second release did not panic")
		}
	}()
	b.Release()
}

func BenchmarkGetRelease200K(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		buf := Get(200_000)
		buf.Release()
	}
}
