# Sourced by benches/h200_run.sh and benches/h200_training_loop.sh (lent H200): install the
# carried wheels in $W (.whl/) once per set of wheels into /tmp/h200-site (a warm machine keeps
# /tmp; pip --target does not replace what is there, so a changed set of wheels starts afresh),
# then export PYTHONPATH and LD_LIBRARY_PATH (the shared libraries of the carried wheels — cuCIM,
# nvImageCodec and its extensions, nvTIFF, openslide-bin, auditwheel's .libs folders — then
# CUDA's). Needs W and PY; sets SITE. Returns 1 when there are no wheels or pip fails.
ls $W/*.whl >/dev/null 2>&1 || { echo "no wheels in $W (run benches/fetch_h200_wheels.sh here and carry .whl)"; return 1; }
ls $W/slidestream-*.whl >/dev/null 2>&1 || echo "WARNING: no slidestream wheel in $W: the slidestream rows need it (maturin build --release -m py/Cargo.toml --out .whl)"
SITE=/tmp/h200-site
stamp=$(cat $W/*.whl | md5sum | cut -d' ' -f1)
if [ "$(cat $SITE/.wheels 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$SITE"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target $SITE $W/*.whl || { echo "pip install failed"; return 1; }
  mkdir -p $SITE && echo "$stamp" > $SITE/.wheels
else
  echo "wheels already installed in $SITE"
fi
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
libdirs=$(find $SITE -name '*.so*' \( -path "$SITE/nvidia/*" -o -path "$SITE/cucim*" -o -path "$SITE/openslide_bin/*" \) -printf '%h\n' | sort -u | paste -sd:)
export LD_LIBRARY_PATH=${libdirs}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
