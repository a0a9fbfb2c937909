/** What every page needs besides its own data. */
export interface PageContext {
  /** The mount path, '' at the root; every link starts with it. */
  readonly base: string;
  /** This browser's CSRF token, put in every form. */
  readonly csrf: string;
  readonly readOnly: boolean;
  /** The store, credentials hidden. */
  readonly store: string;
  /** Paths of the bundled script and stylesheet (content-hashed). */
  readonly script: string;
  readonly style: string;
}
