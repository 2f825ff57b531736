#!/usr/bin/env python3
"""An origin behind the room may check the fan's pass itself (the cookie
wr_fa_<event>) against the room's public keys, with any JOSE library; this
one uses PyJWT (Debian: python3-jwt). The pass says the fan was admitted
when it was made; only forward auth sees a revocation or a leave at once.

    python3 verify_pass.py https://tickets.example.com/.well-known/jwks.json "$PASS"
"""
import sys
from datetime import datetime, timezone

import jwt

if len(sys.argv) != 3:
    sys.exit("usage: verify_pass.py JWKS_URL PASS")
jwks_url, token = sys.argv[1], sys.argv[2]
try:
    key = jwt.PyJWKClient(jwks_url).get_signing_key_from_jwt(token)
    claims = jwt.decode(token, key.key, algorithms=["EdDSA"], issuer="waitroom",
                        audience="site", options={"require": ["exp", "sub", "evt"]})
except jwt.PyJWTError as e:
    sys.exit(f"refused: {e}")
until = datetime.fromtimestamp(claims["exp"], timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
print(f"event {claims['evt']} ticket {claims['sub']} until {until}")
