/** The bundled script and stylesheet, by the file names pages link to (content-hashed, cached for good). */
import { ASSETS_VERSION, DASHBOARD_SCRIPT, DASHBOARD_STYLE } from './assets.generated.js';

export { ASSETS_VERSION };

export const ASSET_FILES: ReadonlyMap<string, { readonly type: string; readonly body: string }> = new Map([
  [`app.${ASSETS_VERSION}.js`, { type: 'text/javascript; charset=utf-8', body: DASHBOARD_SCRIPT }],
  [`app.${ASSETS_VERSION}.css`, { type: 'text/css; charset=utf-8', body: DASHBOARD_STYLE }],
]);
