package providers

import (
	"io"
	"os"
)

// SpoolBatch writes what write writes to a temporary file and returns it
// rewound, with its size, for an upload that needs its length (and, for
// a signed upload, its hash) before it is sent: a batch's lines may be
// larger than memory should hold. done closes and removes the file.
func SpoolBatch(write func(io.Writer) error) (f *os.File, size int64, done func(), err error) {
	f, err = os.CreateTemp("", "llm-batch-*.jsonl")
	if err != nil {
		return nil, 0, nil, err
	}
	done = func() { _ = f.Close(); _ = os.Remove(f.Name()) }
	if err = write(f); err == nil {
		if size, err = f.Seek(0, io.SeekCurrent); err == nil {
			_, err = f.Seek(0, io.SeekStart)
		}
	}
	if err != nil {
		done()
		return nil, 0, nil, err
	}
	return f, size, done, nil
}
