//go:build !unix

package memory

import "os"

// On platforms without flock the store relies on its in-process mutex only.
func flock(*os.File) error   { return nil }
func funlock(*os.File) error { return nil }
