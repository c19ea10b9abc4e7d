/** Where a webhook's deliveries come from; it decides how a delivery is verified. */
export type SourceType = 'github' | 'gitea' | 'generic';
export const SOURCE_TYPES: readonly SourceType[] = ['github', 'gitea', 'generic'];
