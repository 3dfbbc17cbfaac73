//go:build !unix

package gateway

import "os"

// fileIdentity is 0 where there are no inodes: size and modification time decide,
// with the periodic re-read as the safety net.
func fileIdentity(os.FileInfo) uint64 { return 0 }
