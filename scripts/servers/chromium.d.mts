/** Types of scripts/servers/chromium.mjs. */
export declare const packages: string[];
export declare const binary: string;
export declare function ensureChromium(): string;
