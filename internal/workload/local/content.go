package local

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// writeLocalContent writes the content files into a folder of this host, named by
// digest as the contract's ContentDir wants, and points cfg at it. Files already there
// are kept (their name is their digest); files no longer named are removed: the adapter
// serves content from memory once loaded, so the running one does not need them.
//
// With unread, files hold the digests only (workload.Desired.ContentUnread): a file not
// already there is workload.ErrContentNotRead.
func (l *Runtime) writeLocalContent(key types.NamespacedName, cfg *adapterconfig.Config, files map[string][]byte, unread bool) error {
	if err := l.pruneLocalContent(key, files); err != nil {
		return err
	}
	if len(files) == 0 {
		return nil
	}
	dir := filepath.Join(l.MemoryDir, ".content", key.Namespace, key.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create the content folder: %w", err)
	}
	for digest, data := range files {
		onHost := filepath.Join(dir, digest)
		if _, err := os.Stat(onHost); err == nil {
			continue
		}
		if unread {
			return workload.ErrContentNotRead
		}
		if err := writeFileAtomically(onHost, data); err != nil {
			return fmt.Errorf("write content file %s: %w", digest, err)
		}
	}
	cfg.ContentDir = dir
	return nil
}

// pruneLocalContent removes the files of the content folder that the config no longer
// names.
func (l *Runtime) pruneLocalContent(key types.NamespacedName, files map[string][]byte) error {
	dir := filepath.Join(l.MemoryDir, ".content", key.Namespace, key.Name)
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the content folder: %w", err)
	}
	for _, e := range entries {
		if _, named := files[e.Name()]; !named {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("remove content file %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}
