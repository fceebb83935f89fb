// A real OpenID provider for the interop tests: `oidc-provider` (npm, pinned in
// package-lock.json) on 127.0.0.1, issuing OAuth 2.0 client-credentials access tokens as
// JWTs (RFC 9068) for one resource server, signed with the keys the test hands it.
//
// Usage: node provider.mjs CONFIG.json
//
// CONFIG.json (written by tests/python/test_interop_oidc.py):
//   {
//     "port": 43123,                      // listen on 127.0.0.1:port; issuer http://127.0.0.1:port
//     "resource": "urn:a2a-gateway",      // the one resource server: the tokens' `aud`
//     "scopes": ["a2a.invoke", "a2a.read"],
//     "keys": [{"kid": "k2", "pem_file": "/…/rsa-2.pem"}, …],  // RS256 signing keys, the
//                                         // first signs; all are published in the JWKS
//     "clients": [{"client_id": "…", "client_secret": "…", "scope": "a2a.invoke",
//                  "tenant": "tenant-a"}]  // `tenant` becomes the tokens' `tenant` claim
//   }
//
// Prints "oidc-provider listening on http://127.0.0.1:PORT" once it accepts connections.
// Discovery: /.well-known/openid-configuration; JWKS: its jwks_uri; tokens: its
// token_endpoint (POST grant_type=client_credentials, client_secret_basic or _post).

import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';

import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const issuer = `http://127.0.0.1:${config.port}`;
const tenants = new Map(config.clients.map((c) => [c.client_id, c.tenant]));

const jwks = {
  keys: config.keys.map(({ kid, pem_file: pemFile }) => ({
    ...createPrivateKey(readFileSync(pemFile)).export({ format: 'jwk' }),
    kid,
    alg: 'RS256',
    use: 'sig',
  })),
};

const provider = new Provider(issuer, {
  jwks,
  clients: config.clients.map((c) => ({
    client_id: c.client_id,
    client_secret: c.client_secret,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    scope: c.scope,
    token_endpoint_auth_method: 'client_secret_basic',
  })),
  scopes: config.scopes,
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: false },
    resourceIndicators: {
      enabled: true,
      // A token request without `resource` is for the gateway.
      defaultResource: () => config.resource,
      getResourceServerInfo: (_ctx, resourceIndicator) => {
        if (resourceIndicator !== config.resource) {
          throw new Provider.errors.InvalidTarget();
        }
        return {
          scope: config.scopes.join(' '),
          audience: config.resource,
          accessTokenTTL: 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  extraTokenClaims: (_ctx, token) => {
    const tenant = tenants.get(token.clientId);
    return tenant ? { tenant } : undefined;
  },
});

const server = provider.listen(config.port, '127.0.0.1', () => {
  console.log(`oidc-provider listening on ${issuer}`);
});

function stop() {
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
