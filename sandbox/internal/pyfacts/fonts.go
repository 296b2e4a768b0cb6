package pyfacts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// FontList is matplotlib's font list as the host built it for one
// interpreter: the file font_manager writes into its cache directory and
// reads back at import, so that a run which finds it there does not build
// its own (about 0.6 s).
//
// It is built by a trusted probe, never by a run: the interpreter started
// by the host with an environment built from nothing (an empty HOME and
// MPLCONFIGDIR of the probe's own) imports matplotlib.font_manager, which
// writes the list, and prints it. Nothing of a run's ever reaches it.
type FontList struct {
	// Name is the file's name, "fontlist-vN.json", N being
	// font_manager.FontManager.__version__.
	Name string `json:"name"`
	// DataPath is matplotlib.get_data_path(): the font list names the
	// fonts matplotlib ships relative to it.
	DataPath string `json:"data_path"`
	// Data is the file's content, JSON, at most MaxFontListBytes.
	Data []byte `json:"data"`
	// Fonts are the font files it names, absolute (checked, not read).
	Fonts []string `json:"-"`
}

// MaxFontListBytes is the largest font list built or served; a larger one
// is not used (matplotlib builds its own in each run).
const MaxFontListBytes = 512 << 10

// fontProbeTimeout bounds the probe's one interpreter start.
const fontProbeTimeout = 60 * time.Second

var fontListName = regexp.MustCompile(`^fontlist-v([0-9]{1,9})\.json$`)

// fontProbe imports matplotlib.font_manager, which builds the font list in
// MPLCONFIGDIR (the probe's own, empty), and prints where it is with its
// name and matplotlib's data path.
const fontProbe = "import sys,os,json\n" +
	"import matplotlib\n" +
	"from matplotlib import font_manager as fm\n" +
	"n='fontlist-v%d.json'%fm.FontManager.__version__\n" +
	"sys.stdout.write(json.dumps({'name':n,'data_path':matplotlib.get_data_path(),'cache':matplotlib.get_cachedir()}))\n"

// buildFontList runs the probe with python and reads the list it wrote.
func buildFontList(python string) (FontList, error) {
	tmp, err := os.MkdirTemp("", "psych-fonts-")
	if err != nil {
		return FontList{}, fmt.Errorf("build the font list: %w", err)
	}
	defer os.RemoveAll(tmp)
	cache := filepath.Join(tmp, "mpl")
	if err := os.Mkdir(cache, 0o700); err != nil {
		return FontList{}, fmt.Errorf("build the font list: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), fontProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-B", "-c", fontProbe)
	// As a run's: built from nothing, HOME empty (no ~/.fonts), PATH the
	// sandbox's (fc-list is matplotlib's way to the system's fonts).
	cmd.Env = []string{"HOME=" + tmp, "TMPDIR=" + tmp, "MPLCONFIGDIR=" + cache,
		"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C.UTF-8"}
	cmd.Dir = tmp
	out, errOut := &capped{max: 64 << 10}, &capped{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Run(); err != nil {
		return FontList{}, fmt.Errorf("build the font list with %s: %w: %s", python, err, bytes.TrimSpace(errOut.Bytes()))
	}
	var said struct {
		Name     string `json:"name"`
		DataPath string `json:"data_path"`
		Cache    string `json:"cache"`
	}
	if err := decodeStrict(out.Bytes(), &said); err != nil || out.over {
		return FontList{}, fmt.Errorf("build the font list with %s: %w: the probe's answer: %v", python, ErrBadFontList, err)
	}
	if said.Cache != cache || !fontListName.MatchString(said.Name) {
		return FontList{}, fmt.Errorf("build the font list with %s: %w: %q in %q, not a font list in the probe's cache", python, ErrBadFontList, said.Name, said.Cache)
	}
	f, err := os.Open(filepath.Join(cache, said.Name))
	if err != nil {
		return FontList{}, fmt.Errorf("build the font list with %s: %w", python, err)
	}
	defer f.Close()
	data, err := readCapped(f, MaxFontListBytes)
	if err != nil {
		return FontList{}, fmt.Errorf("build the font list with %s: %w", python, err)
	}
	fl := FontList{Name: said.Name, DataPath: said.DataPath, Data: data}
	if err := fl.check(); err != nil {
		return FontList{}, fmt.Errorf("build the font list with %s: %w", python, err)
	}
	return fl, nil
}

// readCapped reads r whole, or fails past max bytes.
func readCapped(r io.Reader, max int) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(r, int64(max)+1)); err != nil {
		return nil, err
	}
	if buf.Len() > max {
		return nil, fmt.Errorf("%w: over %d bytes", ErrBadFontList, max)
	}
	return buf.Bytes(), nil
}

// capped keeps the first max bytes written to it and drops the rest,
// saying so in over: a probe's output never grows the host's memory.
type capped struct {
	bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); len(p) > room {
		c.over = true
		if room > 0 {
			c.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return c.Buffer.Write(p)
}

// check is what a font list must satisfy to be used or cached, wherever it
// came from: a name of the form, an absolute data path, at most
// MaxFontListBytes of JSON that font_manager would take (an object whose
// _version is the name's, whose ttflist and afmlist are lists of entries,
// each naming its font file by an absolute clean path or one relative to
// the data path without ".."). It sets Fonts.
func (fl *FontList) check() error {
	m := fontListName.FindStringSubmatch(fl.Name)
	if m == nil {
		return fmt.Errorf("%w: name %q", ErrBadFontList, fl.Name)
	}
	if !filepath.IsAbs(fl.DataPath) || filepath.Clean(fl.DataPath) != fl.DataPath || strings.ContainsRune(fl.DataPath, 0) {
		return fmt.Errorf("%w: data path %q", ErrBadFontList, fl.DataPath)
	}
	if len(fl.Data) > MaxFontListBytes {
		return fmt.Errorf("%w: %d bytes, over %d", ErrBadFontList, len(fl.Data), MaxFontListBytes)
	}
	var list struct {
		Version json.RawMessage `json:"_version"`
		TTF     []fontEntry     `json:"ttflist"`
		AFM     []fontEntry     `json:"afmlist"`
	}
	dec := json.NewDecoder(bytes.NewReader(fl.Data))
	if err := dec.Decode(&list); err != nil {
		return fmt.Errorf("%w: %w", ErrBadFontList, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data", ErrBadFontList)
	}
	if v, err := strconv.Atoi(string(list.Version)); err != nil || strconv.Itoa(v) != m[1] {
		return fmt.Errorf("%w: version %q in %s", ErrBadFontList, list.Version, fl.Name)
	}
	fl.Fonts = fl.Fonts[:0]
	for _, e := range append(list.TTF, list.AFM...) {
		p := e.Fname
		switch {
		case p == "" || strings.ContainsRune(p, 0) || filepath.Clean(p) != p:
			return fmt.Errorf("%w: font file %q", ErrBadFontList, p)
		case !filepath.IsAbs(p):
			if p == ".." || strings.HasPrefix(p, "../") {
				return fmt.Errorf("%w: font file %q outside the data path", ErrBadFontList, p)
			}
			p = filepath.Join(fl.DataPath, p)
		}
		fl.Fonts = append(fl.Fonts, p)
	}
	return nil
}

// fontEntry is what check reads of a font_manager.FontEntry.
type fontEntry struct {
	Fname string `json:"fname"`
}

// encode and decodeFontList are a font list's cache entry (its tail).
func (fl FontList) encode() ([]byte, error) { return json.Marshal(fl) }

func decodeFontList(b []byte) (FontList, error) {
	var fl FontList
	if err := decodeStrict(b, &fl); err != nil {
		return FontList{}, fmt.Errorf("%w: %w", ErrBadFontList, err)
	}
	if err := fl.check(); err != nil {
		return FontList{}, err
	}
	return fl, nil
}
