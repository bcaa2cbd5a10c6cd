//go:build !unix

package ledger

import "os"

// lockDir does not lock on this system: give each process its own spool
// directory.
func lockDir(*os.File) error { return nil }
