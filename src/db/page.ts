/** A page of a list (G5): what repositories take; http/pagination.ts parses it from the query. */
export interface Page {
  limit: number;
  offset: number;
}
