# Shell helpers for the scripts that build Debian trees (test/vm/run.sh,
# scripts/image.sh). Source it; it defines functions only.

# host_mirror SUITE prints the host's deb sources that serve SUITE itself.
host_mirror() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk -v s="$1" '$1 == "deb" {
			i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
			if ($(i + 1) == s) { print $i; exit }
		}' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk -v s="$1" '
			function flush() { if (deb && hit && uri != "") { print uri; done = 1 } deb = hit = 0; uri = "" }
			/^[ \t]*$/ { flush(); next }
			done { next }
			tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
			tolower($1) == "uris:" { uri = $2 }
			tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == s) hit = 1 }
			END { if (!done) flush() }' "$f" | head -n 1
	done
}

# unmount_under DIR lazily unmounts everything mounted below DIR (debootstrap
# mounts proc and sys in its target).
unmount_under() {
	awk -v p="$1/" 'index($2, p) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m" || true; done
}
