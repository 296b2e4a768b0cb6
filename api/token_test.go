package api

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("0123456789abcdef0123\nignored\n"), 0o600)
	if tok, err := ReadToken(good); err != nil || tok != "0123456789abcdef0123" {
		t.Errorf("ReadToken = %q, %v", tok, err)
	}
	for mode, who := range map[os.FileMode]string{0o644: "its group and others may", 0o640: "its group may", 0o602: "others may"} {
		open := filepath.Join(dir, fmt.Sprintf("open%o", mode))
		os.WriteFile(open, []byte("0123456789abcdef0123\n"), 0o600)
		os.Chmod(open, mode)
		if _, err := ReadToken(open); err == nil || !strings.Contains(err.Error(), who) {
			t.Errorf("a token file of mode %o: %v, want refused saying %q", mode, err, who)
		}
	}
	if err := os.Chmod(good, 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadToken(good); err != nil {
		t.Errorf("a token file of mode 0400: %v", err)
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	if _, err := ReadToken(short); err == nil {
		t.Error("a 3-byte token was accepted")
	}
	large := filepath.Join(dir, "large")
	os.WriteFile(large, []byte("0123456789abcdef0123\n"+strings.Repeat("x", MaxTokenFile)), 0o600)
	if _, err := ReadToken(large); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a token file over %d bytes: %v, want refused", MaxTokenFile, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadToken(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO: %v, want refused without waiting for a writer", err)
	}
}
