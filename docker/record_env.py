"""Write a digest of the image's installed Python environment (run at image build)."""

import hashlib
import importlib.metadata as md
import pathlib
import sys

dists = sorted(f"{d.metadata['Name'].lower()}=={d.version}" for d in md.distributions())
digest = hashlib.sha256("\n".join(dists).encode()).hexdigest()
out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "/opt/vical/ENV_DIGEST")
out.write_text(f"sha256:{digest}\n")
print(f"environment digest sha256:{digest} ({len(dists)} distributions)")
