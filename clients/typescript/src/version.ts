/** The version this client reports in its User-Agent; package.json's. */
export const VERSION = "0.1.0";
