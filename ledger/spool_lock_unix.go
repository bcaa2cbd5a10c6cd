//go:build unix

package ledger

import (
	"errors"
	"os"
	"syscall"
)

// lockDir takes an exclusive lock on f (the spool's lock file) without
// waiting: two processes replaying one spool would write its records
// twice. The lock ends with the process.
func lockDir(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errSpoolLocked
	}
	return err
}
