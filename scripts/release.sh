#!/usr/bin/env bash
# make release: versioned archives of the four binaries for each platform,
# plus a sha256 checksums.txt, in dist/:
#
#   dist/writ_<version>_<os>_<arch>.tar.gz   writd writctl writ writ-jobs LICENSE README.md docs/ deploy/
#   dist/checksums.txt                        sha256sum format, one line per archive
#
# VERSION (default: git describe --tags --always --dirty), COMMIT and DATE
# are stamped into the binaries like `make build`; PLATFORMS overrides the
# os/arch list. Binaries are static (CGO_ENABLED=0) and built with
# -trimpath. The script checks what it wrote before it exits.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
DATE=${DATE:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64}
DIST=${DIST:-dist}
VPKG=github.com/writ-dev/writ/version
LDFLAGS="-s -w -X $VPKG.version=$VERSION -X $VPKG.commit=$COMMIT -X $VPKG.date=$DATE"
BINARIES=(writd writctl writ writ-jobs)
EXTRAS=(LICENSE README.md docs deploy)
# Archive entries get the commit's time and owner 0, so two runs of one
# commit with the same DATE produce identical archives.
MTIME=$(git log -1 --format=%cI 2>/dev/null || echo "$DATE")

rm -rf "$DIST"
mkdir -p "$DIST"
archives=()
for p in $PLATFORMS; do
	os=${p%/*} arch=${p#*/}
	name="writ_${VERSION}_${os}_${arch}"
	stage="$DIST/$name"
	mkdir -p "$stage"
	echo "release: $name"
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch $GO build -trimpath -ldflags "$LDFLAGS" -o "$stage/" \
		./cmd/writd ./cmd/writctl ./cmd/writ ./examples/jobs/cmd/writ-jobs
	cp -R "${EXTRAS[@]}" "$stage/"
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="$MTIME" \
		-C "$DIST" -czf "$DIST/$name.tar.gz" "$name"
	rm -rf "$stage"
	archives+=("$name.tar.gz")
done
(cd "$DIST" && sha256sum "${archives[@]}" > checksums.txt)

# Check: the checksums match, and every archive holds the binaries (for its
# platform) and the extras under its one top-level directory.
(cd "$DIST" && sha256sum --quiet -c checksums.txt)
for a in "${archives[@]}"; do
	name=${a%.tar.gz}
	list=$(tar -tzf "$DIST/$a")
	for f in "${BINARIES[@]}" LICENSE README.md deploy/compose.yaml deploy/writd.service deploy/writd.yaml docs/deploy.md; do
		grep -qx "$name/$f" <<<"$list" || { echo "release: $a lacks $f"; exit 1; }
	done
	if grep -qv "^$name/" <<<"$list"; then echo "release: $a has entries outside $name/"; exit 1; fi
done
echo "release: $VERSION: ${archives[*]} and checksums.txt in $DIST/"
