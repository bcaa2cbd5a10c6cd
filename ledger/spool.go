package ledger

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The spool keeps the records the database could not take, on disk, in
// order, until it takes them (the ledger's keeper replays them, replay.go).
// It is a directory of segment files, each appended to by the ledger's
// writer alone and read back by its keeper alone:
//
//	lock                       held (flock) by the process using the spool
//	<ordinal>-<id>.seg         frames (spoolcodec.go), oldest ordinal first
//
// A segment's records are numbered from 1 in the order written; the
// database commits a segment's position (the number of its last record
// written, keyed by the segment's random id) in the transaction of its
// records (SpoolStore), so replaying a segment again after a crash skips
// what is already in: each record is written exactly once. Every append
// is fsync'd before it counts. Files are 0600, the directory 0700.

// Defaults of the spool.
const (
	// typicalSpooled is a gateway record's frame, in bytes, with room to
	// spare: a 36-byte trace id, key, workspace and organisation names,
	// provider, model, operation, cache state and two metadata pairs
	// encode to about 290 (TestSpoolDefaultHoldsAnHour measures it).
	typicalSpooled = 320
	// DefaultSpoolBytes bounds the spool by default: an hour of records
	// at 1,000 requests a second (about 1.15 GB).
	DefaultSpoolBytes = 3600 * 1000 * typicalSpooled
	// segmentBytes is the size at which the writer starts a new segment;
	// the keeper deletes each segment once all its records are written.
	segmentBytes = 64 << 20
	// readChunk is how much of a segment the keeper reads at a time.
	readChunk = 1 << 20
)

var errSpoolLocked = errors.New("ledger: the spool directory is in use by another process")

// Spool is a ledger's on-disk queue for the records its database could
// not take. OpenSpool opens one; it is given to New in Config.Spool.
type Spool struct {
	dir    string
	max    int64
	segMax int64
	lock   *os.File

	mu    sync.Mutex
	segs  []*segment // oldest first
	bytes int64      // the segments' sizes
	// appended counts the records the spool has taken (with those found
	// at open), done those written, skipped or refused since; changed is
	// closed and replaced whenever done moves (Ledger.Sync waits on it).
	appended, done uint64
	changed        chan struct{}
	// oldest is the time of the oldest record not yet written, for the
	// writer lag metric (zero when none is waiting).
	oldest  time.Time
	nextOrd uint64
}

// segment is one file of the spool. The fields above mu's line in Spool
// are guarded by it: n, size, sealed, committed. The read state belongs
// to the keeper alone.
type segment struct {
	ord  uint64
	id   string
	path string
	// n and size are the records and bytes durably written; sealed is set
	// once the writer appends to it no more; committed is the number of
	// the last record the database has.
	n, committed uint64
	size         int64
	sealed       bool
	f            *os.File // the writer's handle, while not sealed

	// read state (keeper): the handle, the offset of the next frame and
	// its record's number, the offset and number the database is known
	// to have reached, and whether that position was read from it.
	rf         *os.File
	roff, coff int64
	rseq, cseq uint64
	posKnown   bool
}

// OpenSpool opens (creating it 0700 if needed) the spool directory dir,
// bounded to max bytes (DefaultSpoolBytes when 0), and takes its lock; a
// spool another process holds is an error. Segments left by an earlier
// run are checked (a frame cut short by a crash ends its segment, which
// is truncated there) and queued for replay.
func OpenSpool(dir string, max int64) (*Spool, error) {
	if max <= 0 {
		max = DefaultSpoolBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: creating the spool directory: %v", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ledger: opening the spool: %v", err)
	}
	if err := lockDir(lock); err != nil {
		lock.Close()
		if errors.Is(err, errSpoolLocked) {
			return nil, fmt.Errorf("%w: %s", errSpoolLocked, dir)
		}
		return nil, fmt.Errorf("ledger: locking the spool: %v", err)
	}
	s := &Spool{dir: dir, max: max, segMax: min(segmentBytes, max/8+1), lock: lock, changed: make(chan struct{}), nextOrd: 1}
	if err := s.load(); err != nil {
		lock.Close()
		return nil, err
	}
	return s, nil
}

// load queues the segments an earlier run left, sealed.
func (s *Spool) load() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("ledger: reading the spool: %v", err)
	}
	for _, e := range entries {
		ord, id, ok := parseSegmentName(e.Name())
		if !ok {
			continue
		}
		seg := &segment{ord: ord, id: id, path: filepath.Join(s.dir, e.Name()), sealed: true}
		if err := seg.check(); err != nil {
			return err
		}
		if seg.n == 0 {
			_ = os.Remove(seg.path)
			continue
		}
		s.segs = append(s.segs, seg)
		s.bytes += seg.size
		s.appended += seg.n
		s.nextOrd = max(s.nextOrd, ord+1)
	}
	slices.SortFunc(s.segs, func(a, b *segment) int { return cmp.Compare(a.ord, b.ord) })
	if len(s.segs) > 0 {
		s.oldest = time.Now()
	}
	return nil
}

// check counts a segment's intact frames, and cuts it after the last.
func (seg *segment) check() error {
	b, err := os.ReadFile(seg.path)
	if err != nil {
		return fmt.Errorf("ledger: reading a spool segment: %v", err)
	}
	var r Record
	off := 0
	for off < len(b) {
		n, err := readFrame(b[off:], &r)
		if err != nil {
			break
		}
		off += n
		seg.n++
	}
	seg.size = int64(off)
	if off < len(b) {
		return os.Truncate(seg.path, int64(off))
	}
	return nil
}

func segmentName(ord uint64, id string) string { return fmt.Sprintf("%016x-%s.seg", ord, id) }

func parseSegmentName(name string) (uint64, string, bool) {
	base, ok := strings.CutSuffix(name, ".seg")
	if !ok {
		return 0, "", false
	}
	o, id, ok := strings.Cut(base, "-")
	if !ok || len(o) != 16 || id == "" {
		return 0, "", false
	}
	ord, err := strconv.ParseUint(o, 16, 64)
	return ord, id, err == nil
}

// Dir is the spool's directory.
func (s *Spool) Dir() string { return s.dir }

// Append writes recs at the spool's end, in order, and fsyncs them. It
// returns how many it kept: the records beyond the spool's bound are
// not written (the caller counts them dropped). Only the ledger's writer
// appends.
func (s *Spool) Append(recs []Record) (int, error) {
	s.mu.Lock()
	room := s.max - s.bytes
	seg := s.active()
	s.mu.Unlock()
	buf := make([]byte, 0, len(recs)*typicalSpooled)
	kept := 0
	for i := range recs {
		next := appendFrame(buf, &recs[i])
		if int64(len(next)) > room {
			break
		}
		buf, kept = next, kept+1
	}
	if kept == 0 {
		return 0, nil
	}
	if seg == nil || seg.size >= s.segMax {
		var err error
		if seg, err = s.startSegment(); err != nil {
			return 0, err
		}
	}
	if _, err := seg.f.Write(buf); err != nil {
		// A partial frame is cut off when the segment is next opened;
		// until then nothing past seg.size is read.
		return 0, fmt.Errorf("ledger: writing the spool: %v", err)
	}
	if err := seg.f.Sync(); err != nil {
		return 0, fmt.Errorf("ledger: syncing the spool: %v", err)
	}
	s.mu.Lock()
	if s.appended == s.done {
		s.oldest = recs[0].Time
	}
	seg.n += uint64(kept)
	seg.size += int64(len(buf))
	s.bytes += int64(len(buf))
	s.appended += uint64(kept)
	s.mu.Unlock()
	return kept, nil
}

// active is the segment the writer appends to, or nil (s.mu held).
func (s *Spool) active() *segment {
	if n := len(s.segs); n > 0 && !s.segs[n-1].sealed {
		return s.segs[n-1]
	}
	return nil
}

// startSegment seals the active segment and starts the next.
func (s *Spool) startSegment() (*segment, error) {
	var idb [12]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return nil, err
	}
	s.mu.Lock()
	ord := s.nextOrd
	s.nextOrd++
	s.mu.Unlock()
	seg := &segment{ord: ord, id: hex.EncodeToString(idb[:])}
	seg.path = filepath.Join(s.dir, segmentName(seg.ord, seg.id))
	f, err := os.OpenFile(seg.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ledger: creating a spool segment: %v", err)
	}
	if d, err := os.Open(s.dir); err == nil {
		// The new file's directory entry must survive a crash too.
		_ = d.Sync()
		d.Close()
	}
	seg.f = f
	s.mu.Lock()
	if a := s.active(); a != nil {
		a.seal()
	}
	s.segs = append(s.segs, seg)
	s.mu.Unlock()
	return seg, nil
}

// seal stops appends to seg (s.mu held).
func (seg *segment) seal() {
	seg.sealed = true
	if seg.f != nil {
		seg.f.Close()
		seg.f = nil
	}
}

// Drained reports whether every record the spool took has been written;
// when so it seals the active segment (the keeper deletes it), so the
// writer can write to the database directly again without the spool's
// order and its own crossing. Only the writer calls it.
func (s *Spool) Drained() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.appended != s.done {
		return false
	}
	if a := s.active(); a != nil {
		a.seal()
	}
	return true
}

// Pending is the number of records waiting in the spool.
func (s *Spool) Pending() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appended - s.done
}

// Bytes is the size of the spool's segments.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// lag is the age of the oldest record waiting, or 0.
func (s *Spool) lag(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.appended == s.done || s.oldest.IsZero() {
		return 0
	}
	return max(now.Sub(s.oldest), 0)
}

// progress returns the records taken so far and a channel closed when
// more of them are written.
func (s *Spool) progress() (appended, done uint64, changed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appended, s.done, s.changed
}

// head is the oldest segment with records not yet written, after
// deleting the segments fully written (returned, for ForgetSpool).
// Only the keeper calls it.
func (s *Spool) head() (*segment, []string) {
	var gone []*segment
	s.mu.Lock()
	var head *segment
	for len(s.segs) > 0 {
		seg := s.segs[0]
		if seg.committed < seg.n || !seg.sealed {
			if seg.committed < seg.n {
				head = seg
			}
			break
		}
		s.segs = s.segs[1:]
		s.bytes -= seg.size
		gone = append(gone, seg)
	}
	s.mu.Unlock()
	ids := make([]string, 0, len(gone))
	for _, seg := range gone {
		if seg.rf != nil {
			seg.rf.Close()
		}
		_ = os.Remove(seg.path)
		ids = append(ids, seg.id)
	}
	return head, ids
}

// read returns up to max records of seg after the read position, with
// the number of the last; none when the writer has written no more.
// Only the keeper calls it.
func (s *Spool) read(seg *segment, max int) ([]Record, uint64, error) {
	s.mu.Lock()
	size := seg.size
	s.mu.Unlock()
	if seg.rf == nil {
		f, err := os.Open(seg.path)
		if err != nil {
			return nil, 0, fmt.Errorf("ledger: opening a spool segment: %v", err)
		}
		seg.rf = f
	}
	var out []Record
	buf := make([]byte, 0, readChunk)
	for len(out) < max && seg.roff < size {
		want := min(size-seg.roff, readChunk)
		buf = buf[:want]
		if _, err := seg.rf.ReadAt(buf, seg.roff); err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("ledger: reading the spool: %v", err)
		}
		off := 0
		for len(out) < max && off < len(buf) {
			var r Record
			n, err := readFrame(buf[off:], &r)
			if err != nil {
				break
			}
			off += n
			seg.rseq++
			out = append(out, r)
		}
		if off == 0 {
			// Checked at open and written whole since: a frame that does
			// not read is damage; what follows it cannot be trusted.
			return nil, 0, fmt.Errorf("ledger: spool segment %s is damaged at byte %d", filepath.Base(seg.path), seg.roff)
		}
		seg.roff += int64(off)
	}
	if len(out) > 0 {
		s.mu.Lock()
		s.oldest = out[0].Time
		s.mu.Unlock()
	}
	return out, seg.rseq, nil
}

// commit records that the database has seg's records up to through
// (written, skipped or refused): done moves by the records newly
// covered.
func (s *Spool) commit(seg *segment, through uint64) {
	s.mu.Lock()
	if through > seg.committed {
		s.done += through - seg.committed
		seg.committed = through
		close(s.changed)
		s.changed = make(chan struct{})
	}
	s.mu.Unlock()
}

// discard gives up seg's records not yet written (a damaged segment)
// and returns how many.
func (s *Spool) discard(seg *segment) uint64 {
	s.mu.Lock()
	n, size := seg.n, seg.size
	s.mu.Unlock()
	lost := n - seg.committed
	s.commit(seg, n)
	seg.roff, seg.rseq = size, n
	seg.mark()
	return lost
}

// mark makes the read position the one to return to (rewind): every
// record read so far is in the database.
func (seg *segment) mark() { seg.coff, seg.cseq = seg.roff, seg.rseq }

// rewind returns seg's read position to the last mark, after a write
// that may or may not have been committed: the keeper then asks the
// database where the segment stands before writing again.
func (seg *segment) rewind() {
	seg.roff, seg.rseq, seg.posKnown = seg.coff, seg.cseq, false
}

// Close closes the spool's files and releases its lock; what it holds
// stays on disk for the next OpenSpool.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seg := range s.segs {
		seg.seal()
		if seg.rf != nil {
			seg.rf.Close()
			seg.rf = nil
		}
	}
	return s.lock.Close()
}
