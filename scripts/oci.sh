# Shell functions shared by the image scripts (source it; bash):
#   deb_closure PKG...          the Debian packages PKG... need (no recommends)
#   deb_unpack DEBS DEST PKG... download (cached in DEBS) and unpack PKG...'s
#                               closure into DEST (dpkg-deb -x, no scripts run)
#   oci_archive ROOT TAG ENTRYPOINT CMD OUT
#                               write ROOT as a one-layer image TAG into the tar
#                               OUT: an OCI image layout (index.json, blobs/)
#                               and Docker's manifest.json, so docker load,
#                               podman load, ctr images import and kind load
#                               image-archive all take it. ENTRYPOINT and CMD
#                               are JSON arrays (or null). Deterministic:
#                               sorted, mtime 0, uid/gid 0.

deb_closure() {
	apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
		--no-replaces --no-enhances "$@" | grep '^[a-z]' | sort -u
}

deb_unpack() {
	local debs=$1 dest=$2 p
	shift 2
	mkdir -p "$debs" "$dest"
	for p in $(deb_closure "$@"); do
		if ! ls "$debs/${p}_"*.deb >/dev/null 2>&1; then
			(cd "$debs" && apt-get download -q "$p" 2>&1 | grep -v 'unsandboxed as root' >&2 || true)
			ls "$debs/${p}_"*.deb >/dev/null || { echo "deb_unpack: cannot download $p" >&2; return 1; }
		fi
		dpkg-deb -x "$(ls "$debs/${p}_"*.deb | tail -n1)" "$dest"
	done
}

oci_archive() {
	local root=$1 tag=$2 entrypoint=$3 cmd=$4 out=$5
	local img layer layersize config configsize manifest manifestsize name=${2%%:*} version=${2##*:}
	img=$(mktemp -d)
	mkdir -p "$img/blobs/sha256"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu \
		-C "$root" -cf "$img/layer.tar" .
	layer=$(sha256sum "$img/layer.tar" | cut -d' ' -f1)
	layersize=$(stat -c %s "$img/layer.tar")
	mv "$img/layer.tar" "$img/blobs/sha256/$layer"

	cat >"$img/config.json" <<-JSON
	{"architecture":"amd64","os":"linux","config":{"Entrypoint":$entrypoint,"Cmd":$cmd,"Env":["PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Labels":{"org.opencontainers.image.title":"${name##*/}","org.opencontainers.image.version":"$version"}},"rootfs":{"type":"layers","diff_ids":["sha256:$layer"]},"history":[{"created_by":"scripts/oci.sh"}]}
	JSON
	config=$(sha256sum "$img/config.json" | cut -d' ' -f1)
	configsize=$(stat -c %s "$img/config.json")
	mv "$img/config.json" "$img/blobs/sha256/$config"

	cat >"$img/manifest.oci.json" <<-JSON
	{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:$config","size":$configsize},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:$layer","size":$layersize}]}
	JSON
	manifest=$(sha256sum "$img/manifest.oci.json" | cut -d' ' -f1)
	manifestsize=$(stat -c %s "$img/manifest.oci.json")
	mv "$img/manifest.oci.json" "$img/blobs/sha256/$manifest"

	# containerd names an image without a registry docker.io/<name>.
	local full=$tag
	case ${tag%%/*} in *.*|*:*|localhost) ;; *) full=docker.io/$tag ;; esac
	printf '{"imageLayoutVersion":"1.0.0"}\n' >"$img/oci-layout"
	cat >"$img/index.json" <<-JSON
	{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:$manifest","size":$manifestsize,"annotations":{"io.containerd.image.name":"$full","org.opencontainers.image.ref.name":"$version"}}]}
	JSON
	cat >"$img/manifest.json" <<-JSON
	[{"Config":"blobs/sha256/$config","RepoTags":["$tag"],"Layers":["blobs/sha256/$layer"]}]
	JSON
	mkdir -p "$(dirname "$out")"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$img" -cf "$out" .
	rm -rf "$img"
}
