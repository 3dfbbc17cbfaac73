// Command image writes a container image as a tarball that `ctr images import` loads,
// without a Docker engine or a registry: hack/cluster.sh uses it for the operator image
// (the same content as the Dockerfile: /manager and /adapter, uid 65532) and for the
// sandbox (pause) image of the one-node cluster.
//
//	go run ./hack/image -tag cantus.local/cantus-operator:dev -o op.tar \
//	    -entrypoint /manager /manager=bin/image/manager /adapter=bin/image/adapter
//
// Each argument is DEST=SRC; SRC may be a folder, copied with its tree.
//
// With -content DIR it writes a content-only image instead: DIR's tree at the image's
// root and nothing else (no base files, no entrypoint), as teams publish Agent Skills
// for Kubernetes image volumes:
//
//	go run ./hack/image -tag cantus.local/skill-cataloguing:1 -o skill.tar -content test/cluster/testdata/skill-image
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The distroless nonroot user the Dockerfile's base image defines; the operator's pods run as it.
const nonrootUID = 65532

func main() {
	tag := flag.String("tag", "", "image reference to record in the tarball")
	out := flag.String("o", "", "output tarball")
	entrypoint := flag.String("entrypoint", "", "entrypoint, split on spaces")
	user := flag.String("user", fmt.Sprintf("%d:%d", nonrootUID, nonrootUID), "user:group the image runs as")
	content := flag.String("content", "", "write a content-only image of this folder's tree (no base files, no entrypoint)")
	flag.Parse()
	if *tag == "" || *out == "" || (*entrypoint == "") == (*content == "") {
		fmt.Fprintln(os.Stderr, "usage: image -tag REF -o FILE -entrypoint CMD DEST=SRC...\n       image -tag REF -o FILE -content DIR")
		os.Exit(2)
	}
	var err error
	if *content != "" {
		err = runContent(*tag, *out, *content)
	} else {
		err = run(*tag, *out, strings.Fields(*entrypoint), *user, flag.Args())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(tag, out string, entrypoint []string, user string, files []string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("parsing tag %q: %w", tag, err)
	}
	layer, err := buildLayer(files)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return fmt.Errorf("appending the layer: %w", err)
	}
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		RootFS:       mustRootFS(img),
		Config: v1.Config{
			Entrypoint: entrypoint,
			User:       user,
			WorkingDir: "/home/nonroot",
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		},
	})
	if err != nil {
		return fmt.Errorf("setting the image config: %w", err)
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}

// runContent writes an image whose only layer is dir's tree at the root.
func runContent(tag, out, dir string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("parsing tag %q: %w", tag, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	w := layerWriter{tw: tw, mtime: time.Unix(0, 0)}
	if err := w.copy("", dir); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("closing the layer: %w", err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		return fmt.Errorf("packing the layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return fmt.Errorf("appending the layer: %w", err)
	}
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{Architecture: "amd64", OS: "linux", RootFS: mustRootFS(img)})
	if err != nil {
		return fmt.Errorf("setting the image config: %w", err)
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}

func mustRootFS(img v1.Image) v1.RootFS {
	cf, err := img.ConfigFile()
	if err != nil {
		panic(err)
	}
	return cf.RootFS
}

// buildLayer packs the base files a distroless nonroot image has (passwd, group, a
// writable /tmp, the home folder) and the given files into one layer.
func buildLayer(files []string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	w := layerWriter{tw: tw, mtime: time.Unix(0, 0)}
	w.dir("etc", 0o755, 0)
	w.file("etc/passwd", 0o644, 0, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
	w.file("etc/group", 0o644, 0, []byte("root:x:0:\nnonroot:x:65532:\n"))
	w.dir("tmp", 0o1777, 0)
	w.dir("home", 0o755, 0)
	w.dir("home/nonroot", 0o700, nonrootUID)
	for _, spec := range files {
		dest, src, ok := strings.Cut(spec, "=")
		if !ok {
			return nil, fmt.Errorf("argument %q is not DEST=SRC", spec)
		}
		if err := w.copy(strings.TrimPrefix(path.Clean(dest), "/"), src); err != nil {
			return nil, err
		}
	}
	if w.err != nil {
		return nil, fmt.Errorf("packing the layer: %w", w.err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
}

// layerWriter keeps the first error, so the layer is written as a list of entries.
type layerWriter struct {
	tw    *tar.Writer
	mtime time.Time
	seen  map[string]bool
	err   error
}

func (w *layerWriter) header(h *tar.Header) {
	if w.err != nil {
		return
	}
	if w.seen == nil {
		w.seen = map[string]bool{}
	}
	// Parent folders of a copied file are created once, as root-owned 0755.
	if dir := path.Dir(strings.TrimSuffix(h.Name, "/")); dir != "." && !w.seen[dir+"/"] {
		w.dir(dir, 0o755, 0)
	}
	if w.seen[h.Name] {
		return
	}
	w.seen[h.Name] = true
	h.ModTime = w.mtime
	h.Format = tar.FormatPAX
	w.err = w.tw.WriteHeader(h)
}

func (w *layerWriter) dir(name string, mode int64, uid int) {
	w.header(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid})
}

func (w *layerWriter) file(name string, mode int64, uid int, data []byte) {
	w.header(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Uid: uid, Gid: uid, Size: int64(len(data))})
	if w.err == nil {
		_, w.err = w.tw.Write(data)
	}
}

// copy adds src (a file, or a folder with its tree, symlinks kept) as dest, root-owned.
func (w *layerWriter) copy(dest, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading %s: %w", p, err)
		}
		rel, _ := filepath.Rel(src, p)
		target := path.Join(dest, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("reading %s: %w", p, err)
		}
		switch {
		case d.IsDir():
			w.dir(target, int64(info.Mode().Perm()), 0)
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("reading link %s: %w", p, err)
			}
			w.header(&tar.Header{Typeflag: tar.TypeSymlink, Name: target, Linkname: link, Mode: 0o777})
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p) //nolint:gosec // G122: the build reads its own checkout, which nobody else writes to
			if err != nil {
				return fmt.Errorf("reading %s: %w", p, err)
			}
			w.file(target, int64(info.Mode().Perm()), 0, data)
		}
		return w.err
	})
}
