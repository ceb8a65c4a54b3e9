"""Which environment variables hold secrets: the one rule the sandbox, the checker and the
transcripts share (a sandboxed command and a candidate never get them; a transcript never
shows their values)."""

import re

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
