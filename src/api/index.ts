export {
  LabelSelectorRequirementSchema,
  LabelSelectorSchema,
  ResourceGroupSchema,
  type LabelSelector,
  type LabelSelectorRequirement,
  type ResourceGroup,
} from './label-selector.js';
