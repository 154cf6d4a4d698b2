// Package sandbox defines the conch sandbox image: its Containerfile, the
// setup script shared by both builds, the image configuration and a content
// hash over all of it, plus the offline build of its root file system with
// debootstrap. It knows nothing about container engines; sandbox/docker
// imports the result.
package sandbox

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

//go:embed Containerfile
var containerfile []byte

//go:embed setup.sh
var setupScript []byte

// formatVersion changes when the way the image is assembled changes in a way
// the embedded files do not show (for example the tar writer).
const formatVersion = "1"

// Suite is the Debian release the image is built from.
const Suite = "bookworm"

// Packages are installed on top of a minimal Debian. Keep in step with the
// Containerfile (a test checks).
var Packages = []string{"bash", "tmux", "coreutils", "git", "ca-certificates", "procps", "python3"}

// Image configuration, the same in the Containerfile and the offline build.
const (
	User       = "1000:1000"
	WorkingDir = "/workspace"
	// AgentDir is where the conch binary is bind-mounted read-only.
	AgentDir = "/opt/conch"
)

// Env is the image's environment. Debian's libc has C.UTF-8 built in.
var Env = []string{"LANG=C.UTF-8", "LC_ALL=C.UTF-8", "HOME=/workspace", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// Cmd keeps the container alive; the engine's init reaps orphans.
var Cmd = []string{"sleep", "infinity"}

// HashLabel is the image label carrying Hash.
const HashLabel = "conch.image-hash"

// RefLabel carries the reference conch built an image as. An image built
// FROM conch's inherits HashLabel; only one whose RefLabel is the configured
// reference is conch's own, to rebuild when its definition changes.
const RefLabel = "conch.image-ref"

// Containerfile returns the Containerfile text.
func Containerfile() []byte { return bytes.Clone(containerfile) }

// SetupScript returns setup.sh, which turns a Debian root file system into the image.
func SetupScript() []byte { return bytes.Clone(setupScript) }

// Hash is a content hash over the image's definition: a changed definition
// gives a new hash, and conch rebuilds the image.
func Hash() string {
	h := sha256.New()
	for _, part := range [][]byte{
		[]byte(formatVersion), []byte(Suite), []byte(strings.Join(Packages, ",")),
		[]byte(User), []byte(WorkingDir), []byte(strings.Join(Env, "\n")), []byte(strings.Join(Cmd, " ")),
		containerfile, setupScript,
	} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Changes returns the Dockerfile instructions an image import applies to the
// bare root file system so that it matches the Containerfile build; ref is
// the reference the image is imported as.
func Changes(ref string) []string {
	var cs []string
	for _, e := range Env {
		cs = append(cs, "ENV "+e)
	}
	cmd := make([]string, len(Cmd))
	for i, c := range Cmd {
		cmd[i] = fmt.Sprintf("%q", c)
	}
	return append(cs,
		"USER "+User,
		"WORKDIR "+WorkingDir,
		"CMD ["+strings.Join(cmd, ", ")+"]",
		"LABEL "+HashLabel+"="+Hash(),
		"LABEL "+RefLabel+"="+ref,
	)
}

// BuildContext returns a tar with the Containerfile and setup.sh, the build
// context for an engine-side build.
func BuildContext() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{{"Containerfile", containerfile}, {"setup.sh", setupScript}} {
		hdr := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	return buf.Bytes(), nil
}
